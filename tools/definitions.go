package tools

// The tools' names.
const (
	NameExecute       = "execute_command"
	NameReadOutput    = "read_output"
	NameProcessOutput = "process_output"
	NameProcessStdin  = "process_stdin"
	NameProcessKill   = "process_kill"
	NameProcessList   = "process_list"
	NameReadFile      = "read_file"
	NameWriteFile     = "write_file"
	NameEditFile      = "edit_file"
	NameListFiles     = "list_files"
	NameFindFiles     = "find_files"
	NameDeleteFile    = "delete_file"
)

// definitions returns the tools of s, with their schemas written by hand
// (one JSON Schema per tool, the dialect every framework accepts).
func (s *Set) definitions() []definition {
	return []definition{
		{
			name: NameExecute, title: "Run a command",
			desc: `Run a shell command in the workspace's sandbox and return its output and exit code. Pipes, redirections and chaining (&&, ;) work; quote paths that hold spaces. timeout is in seconds. cwd, relative to the workspace's working directory, overrides it. Long output is cut to its head and tail, and the result names a handle to read it all with read_output. Use background: true for servers and watchers: you get a process id at once, then poll process_output with a cursor, write with process_stdin, stop with process_kill.`,
			schema: `{"type":"object","properties":{
"command":{"type":"string","minLength":1,"description":"The shell command line, e.g. \"npm install\", \"ls -la src/\", \"go test ./... 2>&1 | tail -50\""},
"timeout":{"type":"number","exclusiveMinimum":0,"description":"Seconds before the command is killed (exit code 124). Default: the sandbox's for a foreground command, none for a background one."},
"cwd":{"type":"string","description":"Working directory, absolute or relative to the workspace's."},
"env":{"type":"object","additionalProperties":{"type":"string"},"description":"Environment variables to add, NAME: value."},
"background":{"type":"boolean","description":"Start the command in the background and return its process id at once."}
},"required":["command"],"additionalProperties":false}`,
			destructive: true,
			run:         typed(s.Execute, renderExecute),
		},
		{
			name: NameReadOutput, title: "Read a command's whole output", readOnly: true,
			desc: `Read a page of the whole output of a command whose result was cut, by the handle the result named. Pages are at most the size of a result; continue from nextOffset.`,
			schema: `{"type":"object","properties":{
"handle":{"type":"string","minLength":1,"description":"The handle the cut result named, e.g. \"out-1\"."},
"stream":{"type":"string","enum":["stdout","stderr"],"description":"Which stream (default stdout)."},
"offset":{"type":"integer","minimum":0,"description":"Byte offset to read from (default 0)."},
"length":{"type":"integer","minimum":1,"description":"Bytes to read at most."}
},"required":["handle"],"additionalProperties":false}`,
			run: typed(s.ReadOutput, renderReadOutput),
		},
		{
			name: NameProcessOutput, title: "Read a background process's output", readOnly: true,
			desc: `Read what a background process wrote (stdout and stderr interleaved) after a cursor, and whether it still runs. Start with cursor 0, then pass the nextCursor of the previous call: you never read the same output twice. wait (seconds, up to 60) waits for new output or the exit when there is none yet.`,
			schema: `{"type":"object","properties":{
"pid":{"type":"string","minLength":1,"description":"The process id execute_command returned."},
"cursor":{"type":"integer","minimum":0,"description":"Read output after this offset: 0 at first, then the previous nextCursor."},
"wait":{"type":"number","minimum":0,"maximum":60,"description":"Seconds to wait for new output or the exit when there is none yet."}
},"required":["pid"],"additionalProperties":false}`,
			run: typed(s.ProcessOutput, renderProcessOutput),
		},
		{
			name: NameProcessStdin, title: "Write to a background process",
			desc: `Write data to the standard input of a background process; close: true then closes it so that the process reads end of file. Include "\n" to send a line.`,
			schema: `{"type":"object","properties":{
"pid":{"type":"string","minLength":1,"description":"The process id."},
"data":{"type":"string","description":"The text to write."},
"close":{"type":"boolean","description":"Close standard input after data."}
},"required":["pid"],"additionalProperties":false}`,
			run: typed(s.ProcessStdin, renderProcessStdin),
		},
		{
			name: NameProcessKill, title: "Kill a background process", destructive: true,
			desc:   `Kill a background process and every process it started.`,
			schema: `{"type":"object","properties":{"pid":{"type":"string","minLength":1,"description":"The process id."}},"required":["pid"],"additionalProperties":false}`,
			run:    typed(s.ProcessKill, renderProcessKill),
		},
		{
			name: NameProcessList, title: "List background processes", readOnly: true,
			desc:   `List the sandbox's background processes: id, state (running, or exited with its code) and command.`,
			schema: `{"type":"object","properties":{},"additionalProperties":false}`,
			run:    typed(s.ProcessList, renderProcessList),
		},
		{
			name: NameReadFile, title: "Read a file", readOnly: true,
			desc: `Read a text file of the sandbox, or a range of its lines (offset is the first line, from 1; limit the number of lines, 2000 by default). The result ends with the line numbers shown and the file's line count.`,
			schema: `{"type":"object","properties":{
"path":{"type":"string","minLength":1,"description":"The file, absolute or relative to the working directory."},
"offset":{"type":"integer","minimum":1,"description":"First line to read (from 1)."},
"limit":{"type":"integer","minimum":1,"description":"Lines to read at most."}
},"required":["path"],"additionalProperties":false}`,
			run: typed(s.ReadFile, renderReadFile),
		},
		{
			name: NameWriteFile, title: "Write a file", destructive: true,
			desc: `Create or overwrite a file with the given content, creating its folders. To change part of a file, prefer edit_file.`,
			schema: `{"type":"object","properties":{
"path":{"type":"string","minLength":1,"description":"The file, absolute or relative to the working directory."},
"content":{"type":"string","description":"The whole new content."}
},"required":["path","content"],"additionalProperties":false}`,
			run: typed(s.WriteFile, renderWriteFile),
		},
		{
			name: NameEditFile, title: "Edit a file", destructive: true,
			desc: `Replace exact text in a file: old_string must match the file exactly (whitespace and indentation included) and occur once, unless replace_all is set. Include enough surrounding lines to make it unique. Read the file first.`,
			schema: `{"type":"object","properties":{
"path":{"type":"string","minLength":1,"description":"The file, absolute or relative to the working directory."},
"old_string":{"type":"string","minLength":1,"description":"The exact text to replace."},
"new_string":{"type":"string","description":"The text to put in its place."},
"replace_all":{"type":"boolean","description":"Replace every occurrence instead of requiring exactly one."}
},"required":["path","old_string","new_string"],"additionalProperties":false}`,
			run: typed(s.EditFile, renderWriteFile),
		},
		{
			name: NameListFiles, title: "List a folder", readOnly: true,
			desc:   `List the files and folders of a folder (folders end with /), with file sizes.`,
			schema: `{"type":"object","properties":{"path":{"type":"string","description":"The folder, absolute or relative to the working directory (default: the working directory)."}},"additionalProperties":false}`,
			run:    typed(s.ListFiles, renderListFiles),
		},
		{
			name: NameFindFiles, title: "Find in files", readOnly: true,
			desc: `Search below a folder: text finds the lines that contain it (a literal string, not a regular expression), as file:line: content; name finds the files whose name matches a glob ("*.go" at any depth, "src/**/*.ts" relative to the folder). Give one of them.`,
			schema: `{"type":"object","properties":{
"path":{"type":"string","description":"The folder (or file) to search, absolute or relative to the working directory (default: the working directory)."},
"text":{"type":"string","minLength":1,"description":"Literal text to find in lines."},
"name":{"type":"string","minLength":1,"description":"Glob of the file names or paths to find."}
},"additionalProperties":false}`,
			run: typed(s.FindFiles, renderFindFiles),
		},
		{
			name: NameDeleteFile, title: "Delete a file", destructive: true,
			desc: `Delete a file, or a folder and everything in it with recursive: true.`,
			schema: `{"type":"object","properties":{
"path":{"type":"string","minLength":1,"description":"The file or folder, absolute or relative to the working directory."},
"recursive":{"type":"boolean","description":"Delete a folder and its content."}
},"required":["path"],"additionalProperties":false}`,
			run: typed(s.DeleteFile, renderDeleteFile),
		},
	}
}
