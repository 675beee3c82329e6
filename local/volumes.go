package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrVolumeInUse is returned by RemoveVolume for a volume a sandbox uses.
var ErrVolumeInUse = errors.New("volume in use")

// RemoveVolume removes the named volume of stateDir ("" is
// DefaultStateDir) and its files. A volume that no sandbox made yet is
// not an error. A volume that a sandbox of the state dir names in its
// Volumes, running or stopped, is not removed: the error matches
// ErrVolumeInUse and names the sandboxes.
func RemoveVolume(ctx context.Context, stateDir, name string) error {
	stateDir, err := resolveID(stateDir, name)
	if err != nil {
		return fmt.Errorf("volume name: %w", err)
	}
	users, err := volumeUsers(stateDir, name)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return fmt.Errorf("volume %q is used by sandbox %s: %w; remove them first", name, strings.Join(users, ", "), ErrVolumeInUse)
	}
	if err := removeAll(filepath.Join(stateDir, volumesDir, name)); err != nil {
		return stateDirError(stateDir, err)
	}
	return ctx.Err()
}

// volumeUsers returns the ids of the sandboxes of stateDir whose Config
// names the volume.
func volumeUsers(stateDir, name string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(stateDir, sandboxesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, stateDirError(stateDir, err)
	}
	var users []string
	for _, e := range ents {
		if !e.IsDir() || ValidateID(e.Name()) != nil {
			continue
		}
		m, err := readMeta(sandboxDir(stateDir, e.Name()))
		if err != nil {
			continue // being created or removed
		}
		if slices.ContainsFunc(m.Config.Volumes, func(v Volume) bool { return v.Name == name }) {
			users = append(users, e.Name())
		}
	}
	return users, nil
}
