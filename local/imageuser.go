package local

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// runAs is the user the commands of a sandbox made of an image run as:
// the image's USER, resolved against the /etc/passwd and /etc/group of
// the sandbox's root at every start, as Docker resolves it in a
// container's root.
type runAs struct {
	// Name is the user's name, or the uid given when passwd has no entry.
	Name   string `json:"name"`
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Groups []int  `json:"groups,omitempty"`
	// Home is the user's home folder from passwd; "/" without an entry.
	Home string `json:"home"`
}

// resolveImageUser resolves spec, an image's USER ("name", "uid",
// "name:group", "uid:gid"…), against the contents of a root's /etc/passwd
// and /etc/group (either may be empty when the root has none). A name
// that the files do not list is an error; a number need not be listed.
// Supplementary groups are those of group that list the user, unless spec
// names the group. It returns nil for root (uid and gid 0): commands
// then run as the sandbox's root, as without a USER.
func resolveImageUser(spec string, passwd, group []byte) (*runAs, error) {
	if spec == "" {
		return nil, nil
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if userPart == "" || (hasGroup && groupPart == "") {
		return nil, fmt.Errorf("%w: image user %q: write it as user, uid, user:group or uid:gid", sandbox.ErrInvalidArgument, spec)
	}
	u := &runAs{Name: userPart, Home: "/"}
	uid, numeric := parseID(userPart)
	entry, found := findEntry(passwd, func(f []string) bool {
		if numeric {
			id, ok := parseID(f[2])
			return ok && id == uid
		}
		return f[0] == userPart
	}, 7)
	switch {
	case found:
		u.Name, u.Home = entry[0], entry[5]
		u.UID, _ = parseID(entry[2])
		u.GID, _ = parseID(entry[3])
		if u.Home == "" {
			u.Home = "/"
		}
	case numeric:
		u.UID = uid
	default:
		return nil, fmt.Errorf("%w: image user %q: no such user in the image's /etc/passwd; use a uid or add the user to the image", sandbox.ErrNotFound, userPart)
	}
	if hasGroup {
		gid, numeric := parseID(groupPart)
		if !numeric {
			g, ok := findEntry(group, func(f []string) bool { return f[0] == groupPart }, 4)
			if !ok {
				return nil, fmt.Errorf("%w: image user %q: no such group %q in the image's /etc/group; use a gid or add the group to the image", sandbox.ErrNotFound, spec, groupPart)
			}
			gid, _ = parseID(g[2])
		}
		u.GID = gid
	} else if found {
		u.Groups = memberOf(group, u.Name, u.GID)
	}
	if u.UID == 0 && u.GID == 0 && len(u.Groups) == 0 {
		return nil, nil
	}
	return u, nil
}

// parseID parses a uid or gid.
func parseID(s string) (int, bool) {
	n, err := strconv.ParseUint(s, 10, 31)
	return int(n), err == nil
}

// findEntry returns the fields of the first line of the colon-separated
// table b with at least n fields that match accepts.
func findEntry(b []byte, match func([]string) bool, n int) ([]string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < n {
			continue
		}
		if _, ok := parseID(f[2]); ok && match(f) {
			return f, true
		}
	}
	return nil, false
}

// memberOf returns the gids of the groups of the table group that list
// name as a member, but primary.
func memberOf(group []byte, name string, primary int) []int {
	var gids []int
	findEntry(group, func(f []string) bool {
		gid, _ := parseID(f[2])
		for _, m := range strings.Split(f[3], ",") {
			if strings.TrimSpace(m) == name && gid != primary {
				gids = append(gids, gid)
				break
			}
		}
		return false // visit every line
	}, 4)
	return gids
}
