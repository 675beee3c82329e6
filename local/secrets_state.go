package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbox-dev/agentbox/internal/atomicfile"
	"github.com/agentbox-dev/agentbox/internal/seal"
	"github.com/agentbox-dev/agentbox/internal/secretproxy"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// The secrets of a sandbox at rest: secretsFile in its host folder (mode
// 0600, written atomically, read without following links) holds each
// secret's name, placeholder, hosts and value sealed (internal/seal) with
// the state dir's key, which is a file of its own (secretsKeyFile), so
// that a copy of a sandbox folder does not carry the values.

// Files of the secrets.
const (
	// secretsFile, in the sandbox's folder.
	secretsFile = "secrets.json"
	// secretsKeyFile, in the state dir: the seal key of every sandbox's
	// secrets.
	secretsKeyFile = "secrets/key"
	// secretsCADir, in the state dir: the CA whose certificates the
	// sandboxes trust for their secrets' hosts (root only).
	secretsCADir = "secrets-ca"
	// maxSecretsFile bounds what readSecretRecords reads.
	maxSecretsFile = 16 << 20
)

// secretRecord is a secret as secretsFile holds it.
type secretRecord struct {
	Name        string   `json:"name"`
	Placeholder string   `json:"placeholder"`
	Hosts       []string `json:"hosts"`
	AllowHTTP   bool     `json:"allowHTTP,omitempty"`
	// Sealed is the value, sealed with the state dir's key and bound to
	// the sandbox, the name and the placeholder (sealContext).
	Sealed []byte `json:"sealed"`
}

// secretsRecord is secretsFile.
type secretsRecord struct {
	Secrets []secretRecord `json:"secrets"`
	// Retired are the names of secrets the sandbox held and no longer
	// does: commands get them empty, as pooled toolbox sessions keep the
	// environment they started with.
	Retired []string `json:"retired,omitempty"`
}

// sealContext binds a sealed value to its sandbox, name and placeholder,
// so that it cannot be moved to another record.
func sealContext(id, name, placeholder string) []byte {
	return []byte("agentbox secret\x00" + id + "\x00" + name + "\x00" + placeholder)
}

// newPlaceholder returns a new placeholder.
func newPlaceholder() string { return secretproxy.NewPlaceholder() }

// openSecretsBox returns the seal box of the state dir's secrets.
func openSecretsBox(stateDir string) (*seal.Box, error) {
	b, err := seal.OpenKeyFile(filepath.Join(stateDir, secretsKeyFile))
	if err != nil {
		return nil, stateDirError(stateDir, fmt.Errorf("secrets key: %w", err))
	}
	return b, nil
}

// readSecretRecords returns the records of the sandbox folder dir's
// secrets (none when it has none), without opening the values.
func readSecretRecords(dir string) ([]secretRecord, error) {
	r, err := readSecretsFile(dir)
	return r.Secrets, err
}

// readSecretsFile reads the secretsFile of the sandbox folder dir (empty
// when there is none).
func readSecretsFile(dir string) (secretsRecord, error) {
	var r secretsRecord
	f, err := os.OpenFile(filepath.Join(dir, secretsFile), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read the sandbox's secrets: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretsFile))
	if err != nil {
		return r, fmt.Errorf("read the sandbox's secrets: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("read the sandbox's secrets: %s is damaged: %w", secretsFile, err)
	}
	return r, nil
}

// openSecrets returns the secrets of the sandbox id (folder dir) with
// their values.
func openSecrets(stateDir, dir, id string) ([]heldSecret, error) {
	recs, err := readSecretRecords(dir)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	box, err := openSecretsBox(stateDir)
	if err != nil {
		return nil, err
	}
	held := make([]heldSecret, 0, len(recs))
	for _, r := range recs {
		v, err := box.Open(r.Sealed, sealContext(id, r.Name, r.Placeholder))
		if err != nil {
			return nil, fmt.Errorf("secret %q of sandbox %s: %w: set it again (SetSecrets)", r.Name, id, err)
		}
		held = append(held, heldSecret{Secret: sandbox.Secret{Name: r.Name, Value: string(v), Hosts: r.Hosts, AllowHTTP: r.AllowHTTP}, Placeholder: r.Placeholder})
	}
	return held, nil
}

// writeSecrets makes held the secrets of the sandbox id (folder dir), and
// retired the names it no longer holds; none removes the file.
func writeSecrets(stateDir, dir, id string, held []heldSecret, retired []string) error {
	path := filepath.Join(dir, secretsFile)
	if len(held) == 0 && len(retired) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return stateDirError(stateDir, err)
		}
		return nil
	}
	box, err := openSecretsBox(stateDir)
	if err != nil {
		return err
	}
	r := secretsRecord{Retired: retired}
	for _, h := range held {
		r.Secrets = append(r.Secrets, secretRecord{
			Name: h.Name, Placeholder: h.Placeholder, Hosts: h.Hosts, AllowHTTP: h.AllowHTTP,
			Sealed: box.Seal([]byte(h.Value), sealContext(id, h.Name, h.Placeholder)),
		})
	}
	if err := atomicfile.WriteJSON(path, r); err != nil {
		return stateDirError(stateDir, fmt.Errorf("write the sandbox's secrets: %w", err))
	}
	return nil
}

// forkSecrets gives the fork id (folder dst) the secrets of the sandbox
// srcID (folder src) with new placeholders: a fork's placeholders are its
// own, as a new sandbox's.
func forkSecrets(stateDir, src, srcID, dst, id string) error {
	held, err := openSecrets(stateDir, src, srcID)
	if err != nil || len(held) == 0 {
		return err
	}
	for i := range held {
		held[i].Placeholder = newPlaceholder()
	}
	return writeSecrets(stateDir, dst, id, held, nil)
}
