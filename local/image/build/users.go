package build

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// owner resolves a --chown value, USER[:GROUP] by name or number, against
// the image's /etc/passwd and /etc/group. "" is 0:0; a user without a
// group takes the user's id as group id (as Docker does).
func (v rootView) owner(chown string) (uid, gid int, err error) {
	if chown == "" {
		return 0, 0, nil
	}
	user, group, hasGroup := strings.Cut(chown, ":")
	if uid, err = v.lookupID(user, "/etc/passwd"); err != nil {
		return 0, 0, fmt.Errorf("--chown=%s: %w", chown, err)
	}
	if !hasGroup {
		return uid, uid, nil
	}
	if gid, err = v.lookupID(group, "/etc/group"); err != nil {
		return 0, 0, fmt.Errorf("--chown=%s: %w", chown, err)
	}
	return uid, gid, nil
}

// lookupID returns the id of name: a number, or the third field of its
// line in the image's file db (/etc/passwd or /etc/group).
func (v rootView) lookupID(name, db string) (int, error) {
	if name == "" {
		return 0, errors.New("empty user or group name")
	}
	if name[0] >= '0' && name[0] <= '9' {
		n, err := strconv.ParseUint(name, 10, 32)
		if err != nil || n == 1<<32-1 {
			return 0, fmt.Errorf("id %s out of range (0 to 4294967294)", name)
		}
		return int(n), nil
	}
	b, err := v.readFile(db)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("the image has no %s to look %q up in: use a numeric id", db, name)
	}
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[0] == name {
			id, err := strconv.Atoi(f[2])
			if err != nil {
				return 0, fmt.Errorf("%s: bad id for %q", db, name)
			}
			return id, nil
		}
	}
	return 0, fmt.Errorf("no %q in the image's %s", name, db)
}
