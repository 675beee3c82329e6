package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// maxUserTable caps what is read of a root's /etc/passwd or /etc/group.
const maxUserTable = 4 << 20

// imageUser resolves an image's USER spec in root (the sandbox's writable
// root, a detached mount) for a sandbox whose ids map to the host ids ids:
// nil for root. Every id must be one of the sandbox's.
func imageUser(root *os.File, spec string, ids *idRange) (*runAs, error) {
	if spec == "" {
		return nil, nil
	}
	passwd, err := readUserTable(root, "etc/passwd")
	if err != nil {
		return nil, err
	}
	group, err := readUserTable(root, "etc/group")
	if err != nil {
		return nil, err
	}
	u, err := resolveImageUser(spec, passwd, group)
	if err != nil || u == nil {
		return u, err
	}
	count := 1
	if ids != nil {
		count = ids.Count
	}
	for _, id := range append([]int{u.UID, u.GID}, u.Groups...) {
		if id >= count {
			return nil, fmt.Errorf("%w: image user %q: id %d is outside the sandbox's %d ids (0-%d); use an image whose user has a smaller uid", sandbox.ErrInvalidArgument, spec, id, count, count-1)
		}
	}
	return u, nil
}

// readUserTable reads the file name of the root, resolved inside it
// (readFileInRoot), empty when it does not exist. Anything but a regular
// file there is an error: the host never waits on a FIFO of the sandbox.
func readUserTable(root *os.File, name string) ([]byte, error) {
	b, err := readFileInRoot(int(root.Fd()), name, maxUserTable)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("image user: reading the sandbox's /%s: %w", name, err)
	}
	return b, nil
}
