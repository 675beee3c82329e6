package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/atomicfile"
	"github.com/agentbox-dev/agentbox/internal/lockfile"
	"github.com/agentbox-dev/agentbox/internal/seal"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The files of a SecretStore, under <StateDir>/secrets (mode 0700).
const (
	secretsDir      = "secrets"
	secretStoreFile = "store.json" // the records, values sealed; 0600
	secretKeyFile   = "key"        // the seal key (internal/seal); 0600
	secretLockFile  = "store.lock" // flock'd around every change
)

// secretLockWait bounds the wait for another agentbox changing the store.
const secretLockWait = time.Minute

// maxSecretStore bounds the store file read, in bytes.
const maxSecretStore = 64 << 20

// ErrSecretExists is matched (errors.Is) by the error of a Create whose
// name is taken; it matches fs.ErrExist too.
var ErrSecretExists = fmt.Errorf("secret already exists: %w", fs.ErrExist)

// SecretStore holds the local engine's named secrets, for the CLI: values
// a new sandbox's Config.Secrets is made of ([SecretStore.Resolve]). It
// keeps them in <StateDir>/secrets/store.json, mode 0600, each value
// sealed (AES-256-GCM, internal/seal) with the key in
// <StateDir>/secrets/key, a file of its own; every change is atomic and
// made under a lock, so that concurrent agentbox processes see each
// other's. No method returns or reports a value but Resolve.
type SecretStore struct {
	dir string
	box *seal.Box
}

// StoredSecret describes a secret of a SecretStore, without its value.
type StoredSecret struct {
	// Name is the secret's name, the environment variable a sandbox gets
	// it as by default.
	Name string `json:"name"`
	// Hosts are the hosts its value may be sent to.
	Hosts []string `json:"hosts"`
	// AllowHTTP lets the value go to Hosts over cleartext HTTP too.
	AllowHTTP bool `json:"allowHTTP,omitempty"`
	// Description is the user's note on it.
	Description string `json:"description,omitempty"`
	// Created and Updated are when it was made and last changed.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// storedRecord is a secret as store.json holds it.
type storedRecord struct {
	StoredSecret
	// Sealed is the value, sealed with the record's name as context.
	Sealed []byte `json:"sealed"`
}

// storeFile is the content of store.json.
type storeFile struct {
	Secrets []storedRecord `json:"secrets"`
}

// OpenSecretStore returns the secret store of stateDir ("" for
// DefaultStateDir), making its folder and key when there are none.
func OpenSecretStore(stateDir string) (*SecretStore, error) {
	stateDir, err := useStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, stateDirError(stateDir, err)
	}
	dir := filepath.Join(stateDir, secretsDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("secret store: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secret store: %s is not a folder private to its owner (mode 0700, no symbolic link): fix or remove it", dir)
	}
	box, err := seal.OpenKeyFile(filepath.Join(dir, secretKeyFile))
	if err != nil {
		return nil, fmt.Errorf("secret store: the key %s: %w", filepath.Join(dir, secretKeyFile), err)
	}
	return &SecretStore{dir: dir, box: box}, nil
}

// Create stores s (validated as sandbox.Secret.Canonical does) with a
// description and returns its description. A taken name is an error
// matching ErrSecretExists; bad input stores nothing.
func (st *SecretStore) Create(s sandbox.Secret, description string) (StoredSecret, error) {
	s, err := s.Canonical()
	if err != nil {
		return StoredSecret{}, err
	}
	var out StoredSecret
	err = st.change(func(f *storeFile) error {
		if f.find(s.Name) >= 0 {
			return fmt.Errorf("secret %q: %w: remove it first or update it", s.Name, ErrSecretExists)
		}
		now := time.Now().UTC()
		out = StoredSecret{Name: s.Name, Hosts: s.Hosts, AllowHTTP: s.AllowHTTP, Description: description, Created: now, Updated: now}
		f.Secrets = append(f.Secrets, storedRecord{StoredSecret: out, Sealed: st.box.Seal([]byte(s.Value), []byte(s.Name))})
		return nil
	})
	return out, err
}

// Update changes the value (when value is not nil) and the hosts (when
// hosts is not nil) of the secret name, validated as Create validates,
// and returns its description. An unknown name matches
// sandbox.ErrNotFound; bad input changes nothing.
func (st *SecretStore) Update(name string, value *string, hosts []string) (StoredSecret, error) {
	var out StoredSecret
	err := st.change(func(f *storeFile) error {
		i := f.find(name)
		if i < 0 {
			return secretNotFound(name)
		}
		rec := &f.Secrets[i]
		s := sandbox.Secret{Name: rec.Name, Hosts: rec.Hosts, AllowHTTP: rec.AllowHTTP}
		if hosts != nil {
			s.Hosts = hosts
		}
		if value != nil {
			s.Value = *value
		} else {
			plain, err := st.open(rec)
			if err != nil {
				return err
			}
			s.Value = plain
		}
		s, err := s.Canonical()
		if err != nil {
			return err
		}
		rec.Hosts, rec.Updated = s.Hosts, time.Now().UTC()
		rec.Sealed = st.box.Seal([]byte(s.Value), []byte(s.Name))
		out = rec.StoredSecret
		return nil
	})
	return out, err
}

// List describes every secret, sorted by name, without values.
func (st *SecretStore) List() ([]StoredSecret, error) {
	f, err := st.read()
	if err != nil {
		return nil, err
	}
	out := make([]StoredSecret, len(f.Secrets))
	for i, r := range f.Secrets {
		out[i] = r.StoredSecret
	}
	return out, nil
}

// Delete removes the secret name; an unknown one matches
// sandbox.ErrNotFound. Sandboxes made with it keep it.
func (st *SecretStore) Delete(name string) error {
	return st.change(func(f *storeFile) error {
		i := f.find(name)
		if i < 0 {
			return secretNotFound(name)
		}
		f.Secrets = slices.Delete(f.Secrets, i, i+1)
		return nil
	})
}

// Resolve returns the secrets a new sandbox gets for envToName (each
// environment variable → the name of a stored secret), values included,
// sorted by variable: what local.Config.Secrets takes. Names the store
// does not hold are an error naming them all, matching
// sandbox.ErrNotFound; variable names are checked as sandbox.Secret's.
func (st *SecretStore) Resolve(envToName map[string]string) ([]sandbox.Secret, error) {
	if len(envToName) == 0 {
		return nil, nil
	}
	f, err := st.read()
	if err != nil {
		return nil, err
	}
	envs := make([]string, 0, len(envToName))
	for env := range envToName {
		envs = append(envs, env)
	}
	sort.Strings(envs)
	var out []sandbox.Secret
	var unknown []string
	for _, env := range envs {
		i := f.find(envToName[env])
		if i < 0 {
			unknown = append(unknown, fmt.Sprintf("%q", envToName[env]))
			continue
		}
		plain, err := st.open(&f.Secrets[i])
		if err != nil {
			return nil, err
		}
		r := f.Secrets[i]
		out = append(out, sandbox.Secret{Name: env, Value: plain, Hosts: slices.Clone(r.Hosts), AllowHTTP: r.AllowHTTP})
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("no secret %s in %s: %w (create it with 'agentbox secret create NAME --host HOST')", strings.Join(unknown, ", "), st.dir, sandbox.ErrNotFound)
	}
	return sandbox.CanonicalSecrets(out)
}

// secretNotFound is the error of an unknown secret name.
func secretNotFound(name string) error {
	return fmt.Errorf("secret %q: %w (see 'agentbox secret ls')", name, sandbox.ErrNotFound)
}

// find returns the index of the record name, or -1.
func (f *storeFile) find(name string) int {
	return slices.IndexFunc(f.Secrets, func(r storedRecord) bool { return r.Name == name })
}

// open returns the value of rec.
func (st *SecretStore) open(rec *storedRecord) (string, error) {
	plain, err := st.box.Open(rec.Sealed, []byte(rec.Name))
	if err != nil {
		return "", fmt.Errorf("secret %q: %w (was %s replaced? create the secret again)", rec.Name, err, filepath.Join(st.dir, secretKeyFile))
	}
	return string(plain), nil
}

// change applies edit to the store under its lock and writes the result
// atomically, unless edit fails.
func (st *SecretStore) change(edit func(*storeFile) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), secretLockWait)
	defer cancel()
	lock, err := os.OpenFile(filepath.Join(st.dir, secretLockFile), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("secret store: %w", err)
	}
	defer lock.Close() // releases the flock
	if err := lockfile.Lock(ctx, lock, unix.LOCK_EX); err != nil {
		return fmt.Errorf("secret store: %w", err)
	}
	f, err := st.read()
	if err != nil {
		return err
	}
	if err := edit(f); err != nil {
		return err
	}
	sort.Slice(f.Secrets, func(i, j int) bool { return f.Secrets[i].Name < f.Secrets[j].Name })
	if err := atomicfile.WriteJSON(filepath.Join(st.dir, secretStoreFile), f); err != nil {
		return fmt.Errorf("secret store: %w", err)
	}
	return nil
}

// read returns the store's content: none when there is no file yet.
func (st *SecretStore) read() (*storeFile, error) {
	path := filepath.Join(st.dir, secretStoreFile)
	fh, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return &storeFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret store: %w (it must be a regular file, not a symbolic link)", err)
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("secret store: %s is not a regular file: remove it", path)
	}
	data, err := io.ReadAll(io.LimitReader(fh, maxSecretStore))
	if err != nil {
		return nil, fmt.Errorf("secret store: %w", err)
	}
	var f storeFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("secret store: %s is not a store (%v): fix or remove it", path, err)
	}
	return &f, nil
}
