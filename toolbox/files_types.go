package toolbox

// Wire types of the toolbox API's file search, replace and permission
// routes (toolbox.json names).

// Match is one line found by GET /files/find: the file, the line's number
// (from 1) and its content.
type Match struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// SearchFilesResponse is the answer of GET /files/search: the paths of the
// matching files and folders.
type SearchFilesResponse struct {
	Files []string `json:"files"`
}

// ReplaceRequest is the body of POST /files/replace: replace every
// occurrence of Pattern (a literal string) by NewValue in each of Files.
type ReplaceRequest struct {
	Files    []string `json:"files"`
	Pattern  string   `json:"pattern"`
	NewValue string   `json:"newValue"`
}

// ReplaceResult is the outcome of POST /files/replace for one file.
type ReplaceResult struct {
	File    string `json:"file"`
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
}
