package toolbox

// Wire types of the Daytona toolbox API. Field names and JSON tags follow
// the published spec (toolbox.json); decoding ignores unknown fields.

// ExecuteRequest is the body of POST /process/execute.
type ExecuteRequest struct {
	Command string            `json:"command"`
	Cwd     string            `json:"cwd,omitempty"`
	Envs    map[string]string `json:"envs,omitempty"`
	// Timeout in seconds; 0 means none.
	Timeout int `json:"timeout,omitempty"`
}

// ExecuteResponse is the answer of POST /process/execute. Result holds
// stdout and stderr merged.
type ExecuteResponse struct {
	ExitCode int    `json:"exitCode"`
	Result   string `json:"result"`
}

// CreateSessionRequest is the body of POST /process/session.
type CreateSessionRequest struct {
	SessionID string `json:"sessionId"`
}

// Session describes a session and the commands it ran.
type Session struct {
	SessionID string    `json:"sessionId"`
	Commands  []Command `json:"commands"`
}

// Command describes a session command. ExitCode is nil while it runs.
type Command struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// SessionExecuteRequest is the body of POST /process/session/{id}/exec.
type SessionExecuteRequest struct {
	Command  string `json:"command"`
	RunAsync bool   `json:"runAsync,omitempty"`
	// Async is the legacy alias of RunAsync.
	Async             bool `json:"async,omitempty"`
	SuppressInputEcho bool `json:"suppressInputEcho,omitempty"`
}

// SessionExecuteResponse is the answer of a session exec. For an async exec
// only CmdID is set. Output holds the raw log (with stream markers when the
// client announced a recent SDK version); Stdout and Stderr are split by
// the server. A nil field is sent as an explicit null, as Daytona's daemon
// sends it (every field but cmdId of an async answer; stdout and stderr of
// a sync answer to an SDK older than 0.167.0).
type SessionExecuteResponse struct {
	CmdID    string  `json:"cmdId"`
	Output   *string `json:"output"`
	Stdout   *string `json:"stdout"`
	Stderr   *string `json:"stderr"`
	ExitCode *int    `json:"exitCode"`
}

// SessionSendInputRequest is the body of POST …/command/{id}/input.
type SessionSendInputRequest struct {
	Data string `json:"data"`
}

// SessionCommandLogsResponse is the JSON form of GET …/command/{id}/logs,
// served to SDK versions >= 0.167.0.
type SessionCommandLogsResponse struct {
	Output string `json:"output"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// FileInfo describes a file, as GET /files and /files/info return it.
type FileInfo struct {
	Name        string `json:"name"`
	Path        string `json:"path,omitempty"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	Permissions string `json:"permissions"`
	IsDir       bool   `json:"isDir"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	ModifiedAt  string `json:"modifiedAt"`
	// ModTime is deprecated in the spec (Go's time.String layout).
	ModTime string `json:"modTime"`
}

// FilesDownloadRequest is the body of POST /files/bulk-download.
type FilesDownloadRequest struct {
	Paths []string `json:"paths"`
}

// UploadedFile is the answer of POST /files/upload-v2.
type UploadedFile struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

// BulkUploadResponse is the answer of POST /files/bulk-upload.
type BulkUploadResponse struct {
	Files  []BulkUploadedFile `json:"files"`
	Errors []string           `json:"errors,omitempty"`
}

// BulkUploadedFile is one entry of BulkUploadResponse.
type BulkUploadedFile struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// VersionResponse is the answer of GET /version.
type VersionResponse struct {
	Version string `json:"version"`
}

// DirResponse is the answer of GET /work-dir and GET /user-home-dir.
type DirResponse struct {
	Dir string `json:"dir"`
}

// ErrorResponse is the body of an error answer.
type ErrorResponse struct {
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
	Code       string `json:"code,omitempty"`
	Timestamp  string `json:"timestamp"`
	Path       string `json:"path"`
	Method     string `json:"method,omitempty"`
	Source     string `json:"source,omitempty"`
}
