package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/local"
)

// The keys file (keys.go): serve/keys.json under the state dir, and
// serve/keys.lock, which its writers hold (flock) while they read,
// change and replace it.

// Paths of the keys file and of its lock, under the state dir.
const (
	keysFileName = "serve/keys.json"
	keysLockName = "serve/keys.lock"
)

// keysFile is the content of the keys file.
type keysFile struct {
	Keys []storedKey `json:"keys"`
	Orgs []storedOrg `json:"organizations"`
}

// sorted returns the keys of kf, oldest first.
func (kf *keysFile) sorted() []storedKey {
	keys := slices.Clone(kf.Keys)
	slices.SortStableFunc(keys, func(a, b storedKey) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return keys
}

// keysPath returns the keys file of stateDir.
func keysPath(stateDir string) string { return filepath.Join(stateDir, keysFileName) }

// fileStamp tells one version of a file from another: the keys file is
// replaced (a new inode) at every change.
type fileStamp struct {
	exists     bool
	ino, size  uint64
	mtime, dev int64
}

// stampOf returns the stamp of the file at path; a missing file has the
// zero stamp.
func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fileStamp{}, nil
	}
	if err != nil {
		return fileStamp{}, err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	fs := fileStamp{exists: true, size: uint64(fi.Size()), mtime: fi.ModTime().UnixNano()}
	if st != nil {
		fs.ino, fs.dev = st.Ino, int64(st.Dev)
	}
	return fs, nil
}

// readKeysFile reads the keys file at path (none: no keys) and returns it
// with the stamp of what it read.
func readKeysFile(path string) (*keysFile, fileStamp, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return &keysFile{}, fileStamp{}, nil
	}
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("agentbox serve: reading the API keys: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("agentbox serve: reading the API keys: %w", err)
	}
	fs := fileStamp{exists: true, size: uint64(fi.Size()), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		fs.ino, fs.dev = st.Ino, int64(st.Dev)
	}
	var kf keysFile
	if err := json.NewDecoder(f).Decode(&kf); err != nil {
		return nil, fileStamp{}, fmt.Errorf("agentbox serve: the API keys file %s is damaged (%w): remove it and create the keys again", path, err)
	}
	return &kf, fs, nil
}

// prepareKeys checks stateDir and, when no server runs on it, moves the
// keys an earlier version kept in the records to the keys file.
func prepareKeys(ctx context.Context, stateDir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := local.CheckStateDir(stateDir); err != nil {
		return fmt.Errorf("agentbox serve: %w", err)
	}
	st, err := openStore(stateDir)
	if errors.Is(err, ErrStoreInUse) {
		return nil // the server running moved them when it started
	}
	if err != nil {
		return err
	}
	err = moveStoredKeys(ctx, st, stateDir)
	if cerr := st.close(); err == nil && cerr != nil {
		err = fmt.Errorf("agentbox serve: closing the records: %w", cerr)
	}
	return err
}

// updateKeys runs fn on the keys of stateDir, holding the keys' lock, and
// writes what fn left unless it failed.
func updateKeys(ctx context.Context, stateDir string, fn func(*keysFile) error) error {
	if err := prepareKeys(ctx, stateDir); err != nil {
		return err
	}
	return lockedKeys(stateDir, fn)
}

// lockedKeys is updateKeys without the preparation.
func lockedKeys(stateDir string, fn func(*keysFile) error) error {
	dir := filepath.Join(stateDir, filepath.Dir(keysFileName))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("agentbox serve: creating the records' folder: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(stateDir, keysLockName), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("agentbox serve: locking the API keys: %w", err)
	}
	defer lock.Close() // and so unlocked
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("agentbox serve: locking the API keys: %w", err)
	}
	path := keysPath(stateDir)
	kf, _, err := readKeysFile(path)
	if err != nil {
		return err
	}
	if err := fn(kf); err != nil {
		return err
	}
	data, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return fmt.Errorf("agentbox serve: encoding the API keys: %w", err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// writeFileAtomic replaces the file at path by one holding data (mode
// 0600), durably: a reader sees the old file or the new one, and a crash
// leaves one of them.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*.json")
	if err != nil {
		return fmt.Errorf("agentbox serve: writing the API keys: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a failure
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("agentbox serve: writing the API keys: %w", err)
	}
	return nil
}

// moveStoredKeys moves the keys and organizations that earlier versions
// kept in the records' buckets to the keys file of stateDir.
func moveStoredKeys(_ context.Context, st *store, stateDir string) error {
	var keys []storedKey
	var orgs []storedOrg
	err := st.each(bucketKeys, func(id string, data []byte) error {
		var k storedKey
		if err := json.Unmarshal(data, &k); err != nil {
			return fmt.Errorf("agentbox serve: reading API key %s: %w", id, err)
		}
		keys = append(keys, k)
		return nil
	})
	if err == nil {
		err = st.each(bucketOrgs, func(id string, data []byte) error {
			var o storedOrg
			if err := json.Unmarshal(data, &o); err != nil {
				return fmt.Errorf("agentbox serve: reading organization %s: %w", id, err)
			}
			orgs = append(orgs, o)
			return nil
		})
	}
	if err != nil || len(keys)+len(orgs) == 0 {
		return err
	}
	err = lockedKeys(stateDir, func(kf *keysFile) error {
		for _, k := range keys {
			if !slices.ContainsFunc(kf.Keys, func(o storedKey) bool { return o.ID == k.ID }) {
				kf.Keys = append(kf.Keys, k)
			}
		}
		for _, o := range orgs {
			if !slices.ContainsFunc(kf.Orgs, func(x storedOrg) bool { return x.ID == o.ID }) {
				kf.Orgs = append(kf.Orgs, o)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return st.update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketKeys, bucketOrgs} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
}

// keySet is the server's view of the keys file: read again whenever the
// file changed. Its methods are safe for concurrent use.
type keySet struct {
	path string
	logf func(string, ...any)

	mu    sync.Mutex
	stamp fileStamp // of what keys was read from
	keys  []apiKey
	bad   fileStamp // a damaged version already logged
}

// load reads the keys file at path for the first time: a damaged one is
// an error then.
func (ks *keySet) load() error {
	kf, stamp, err := readKeysFile(ks.path)
	if err != nil {
		return err
	}
	keys, err := apiKeysOf(kf)
	if err != nil {
		return err
	}
	ks.stamp, ks.keys = stamp, keys
	return nil
}

// current returns the keys of the file as it is now. When it cannot be
// read, or is damaged, the keys it had last stay in force, and the
// failure is logged (once per version of the file).
func (ks *keySet) current() []apiKey {
	stamp, err := stampOf(ks.path)
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if err == nil && stamp == ks.stamp {
		return ks.keys
	}
	var kf *keysFile
	if err == nil {
		kf, stamp, err = readKeysFile(ks.path)
	}
	var keys []apiKey
	if err == nil {
		keys, err = apiKeysOf(kf)
	}
	if err != nil {
		if stamp != ks.bad {
			ks.bad = stamp
			ks.logf("agentbox serve: the API keys stay as they were: %v", err)
		}
		return ks.keys
	}
	ks.stamp, ks.keys = stamp, keys
	return keys
}
