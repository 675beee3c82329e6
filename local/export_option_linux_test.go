package local

// NetworkNeedsRootError is networkNeedsRootError, the error a process
// that is not root gets for a network only root can make.
var NetworkNeedsRootError = networkNeedsRootError
