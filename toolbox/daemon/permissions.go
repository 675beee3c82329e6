package daemon

import (
	"io/fs"
	"net/http"
	"os/user"
	"strconv"
)

// handlePermissions is POST /files/permissions: it sets the owner, the
// group and the mode of path, each when given. Every parameter is checked
// before anything changes; the owner and group change first, since that
// clears set-user-ID and set-group-ID bits that the mode may ask for.
func (s *Server) handlePermissions(w http.ResponseWriter, r *http.Request) error {
	p, err := s.queryPath(r, "path")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	mode, setMode, err := parseMode(q.Get("mode"))
	if err != nil {
		return err
	}
	uid, err := lookupID("owner", q.Get("owner"), userID)
	if err != nil {
		return err
	}
	gid, err := lookupID("group", q.Get("group"), groupID)
	if err != nil {
		return err
	}
	if _, err := s.root.stat(p); err != nil {
		return fsError(p, err)
	}
	if uid >= 0 || gid >= 0 {
		if err := s.root.chown(p, uid, gid); err != nil {
			return fsError(p, err)
		}
	}
	if setMode {
		if err := s.root.chmod(p, mode); err != nil {
			return fsError(p, err)
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// parseMode reads an octal mode such as 755 or 0644 (up to 07777); an
// empty one sets nothing.
func parseMode(v string) (fs.FileMode, bool, error) {
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, false, badRequest("invalid mode %q: give octal permission bits such as 755 or 0644 (at most 07777)", v)
	}
	m := fs.FileMode(n).Perm()
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, true, nil
}

// lookupID turns an owner or group, a number or a name that lookup
// resolves, into an id; an empty one gives -1 (unchanged).
func lookupID(what, v string, lookup func(string) (string, error)) (int, error) {
	if v == "" {
		return -1, nil
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil && n < 1<<32-1 {
		return int(n), nil
	}
	id, err := lookup(v)
	if err != nil {
		return 0, badRequest("%s %q is neither a number nor a known name: %v", what, v, err)
	}
	n, err := strconv.Atoi(id)
	if err != nil {
		return 0, badRequest("%s %q has the id %q, which is not a number", what, v, id)
	}
	return n, nil
}

// userID returns the uid of the user name.
func userID(name string) (string, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return "", err
	}
	return u.Uid, nil
}

// groupID returns the gid of the group name.
func groupID(name string) (string, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return "", err
	}
	return g.Gid, nil
}
