package toolbox

// Wire types of the toolbox API's /git routes. Field names and JSON tags
// follow the published spec (toolbox.json).

// GitCloneRequest is the body of POST /git/clone. Username and Password
// authenticate over HTTP(S); they are never stored.
type GitCloneRequest struct {
	URL      string `json:"url"`
	Path     string `json:"path"`
	Branch   string `json:"branch,omitempty"`
	CommitID string `json:"commit_id,omitempty"`
	// Depth makes a shallow clone of that many commits (0: full).
	Depth           int    `json:"depth,omitempty"`
	Username        string `json:"username,omitempty"`
	Password        string `json:"password,omitempty"`
	InsecureSkipTLS bool   `json:"insecure_skip_tls,omitempty"`
}

// GitStatus is the answer of GET /git/status.
type GitStatus struct {
	CurrentBranch   string          `json:"currentBranch"`
	FileStatus      []GitFileStatus `json:"fileStatus"`
	Ahead           int             `json:"ahead"`
	Behind          int             `json:"behind"`
	BranchPublished bool            `json:"branchPublished"`
	Detached        bool            `json:"detached"`
	// Upstream is the upstream tracking branch (e.g. "origin/main"),
	// empty when unset.
	Upstream string `json:"upstream"`
}

// GitFileStatus is one entry of GitStatus.FileStatus (FileStatus in the
// spec). Staging and Worktree are one of the GitStatus… constants.
type GitFileStatus struct {
	Name     string `json:"name"`
	Staging  string `json:"staging"`
	Worktree string `json:"worktree"`
	// Extra is the original name of a renamed file.
	Extra string `json:"extra"`
}

// Values of GitFileStatus.Staging and .Worktree (Status in the spec).
const (
	GitStatusUnmodified         = "Unmodified"
	GitStatusUntracked          = "Untracked"
	GitStatusModified           = "Modified"
	GitStatusAdded              = "Added"
	GitStatusDeleted            = "Deleted"
	GitStatusRenamed            = "Renamed"
	GitStatusCopied             = "Copied"
	GitStatusUpdatedButUnmerged = "Updated but unmerged"
)

// GitAddRequest is the body of POST /git/add. Files are relative to the
// repository; "." adds everything.
type GitAddRequest struct {
	Path  string   `json:"path"`
	Files []string `json:"files"`
}

// GitCommitRequest is the body of POST /git/commit.
type GitCommitRequest struct {
	Path       string `json:"path"`
	Message    string `json:"message"`
	Author     string `json:"author"`
	Email      string `json:"email"`
	AllowEmpty bool   `json:"allow_empty,omitempty"`
}

// GitCommitResponse is the answer of POST /git/commit.
type GitCommitResponse struct {
	Hash string `json:"hash"`
}

// GitCommitInfo is one commit of GET /git/history. Timestamp is RFC 3339.
type GitCommitInfo struct {
	Hash      string `json:"hash"`
	Author    string `json:"author"`
	Email     string `json:"email"`
	Message   string `json:"message"`
	Timestamp string `json:"timestamp"`
}

// GitBranchRequest is the body of POST /git/branches.
type GitBranchRequest struct {
	Path string `json:"path"`
	Name string `json:"name"`
}

// GitDeleteBranchRequest is the body of DELETE /git/branches.
type GitDeleteBranchRequest struct {
	Path string `json:"path"`
	Name string `json:"name"`
}

// ListBranchResponse is the answer of GET /git/branches.
type ListBranchResponse struct {
	Branches []string `json:"branches"`
	// Current is the checked out branch, empty when HEAD is detached.
	Current string `json:"current"`
}

// GitCheckoutRequest is the body of POST /git/checkout. Branch names a
// branch, a remote branch (checked out as a new tracking branch), a tag or
// a commit.
type GitCheckoutRequest struct {
	Path   string `json:"path"`
	Branch string `json:"branch"`
}

// GitPushRequest is the body of POST /git/push.
type GitPushRequest struct {
	Path        string `json:"path"`
	Remote      string `json:"remote,omitempty"`
	Branch      string `json:"branch,omitempty"`
	SetUpstream bool   `json:"set_upstream,omitempty"`
	Username    string `json:"username,omitempty"`
	Password    string `json:"password,omitempty"`
}

// GitPullRequest is the body of POST /git/pull.
type GitPullRequest struct {
	Path     string `json:"path"`
	Remote   string `json:"remote,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// GitInitRequest is the body of POST /git/init.
type GitInitRequest struct {
	Path          string `json:"path"`
	Bare          bool   `json:"bare,omitempty"`
	InitialBranch string `json:"initial_branch,omitempty"`
}

// GitRemote is one remote of ListRemotesResponse.
type GitRemote struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// ListRemotesResponse is the answer of GET /git/remotes.
type ListRemotesResponse struct {
	Remotes []GitRemote `json:"remotes"`
}

// GitAddRemoteRequest is the body of POST /git/remotes.
type GitAddRemoteRequest struct {
	Path      string `json:"path"`
	Name      string `json:"name"`
	URL       string `json:"url"`
	Overwrite bool   `json:"overwrite,omitempty"`
	Fetch     bool   `json:"fetch,omitempty"`
}

// GitResetRequest is the body of POST /git/reset. Mode is one of soft,
// mixed (default), hard, merge or keep; Target defaults to HEAD.
type GitResetRequest struct {
	Path   string   `json:"path"`
	Mode   string   `json:"mode,omitempty"`
	Target string   `json:"target,omitempty"`
	Files  []string `json:"files,omitempty"`
}

// GitRestoreRequest is the body of POST /git/restore. Without Staged and
// Worktree the working tree is restored.
type GitRestoreRequest struct {
	Path     string   `json:"path"`
	Files    []string `json:"files"`
	Source   string   `json:"source,omitempty"`
	Staged   bool     `json:"staged,omitempty"`
	Worktree bool     `json:"worktree,omitempty"`
}

// GitConfigResponse is the answer of GET /git/config; Value is nil when the
// key is not set.
type GitConfigResponse struct {
	Value *string `json:"value"`
}

// GitSetConfigRequest is the body of POST /git/config. Scope is global
// (default), local (Path required) or system.
type GitSetConfigRequest struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Path  string `json:"path,omitempty"`
	Scope string `json:"scope,omitempty"`
}

// GitConfigureUserRequest is the body of POST /git/config/user.
type GitConfigureUserRequest struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Path  string `json:"path,omitempty"`
	Scope string `json:"scope,omitempty"`
}

// GitAuthenticateRequest is the body of POST /git/credentials. Host
// defaults to github.com, Protocol to https.
type GitAuthenticateRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Host     string `json:"host,omitempty"`
	Protocol string `json:"protocol,omitempty"`
}
