package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// API keys of the records (`agentbox serve keys create|ls|rm`): each
// belongs to an organization, created with its first key. Only a key's
// SHA-256 hash is stored: a key is 32 random bytes, which no dictionary
// holds, so a slow password hash would add nothing.
//
// The keys live apart from the other records, in serve/keys.json
// (keysfile.go), because they change while a server runs: the records'
// bbolt file is a running server's alone (its exclusive lock), while the
// keys file is written by the keys commands — under a lock file of its
// own, to a temporary file renamed over it, so that a reader sees the
// old keys or the new ones, never half — and read by a server whenever
// it changed (a stat per authenticated request: a new key works, and a
// removed one is refused, from the next request on). Keys written by
// earlier versions to the records' bucket move to the file when a server
// starts, or a keys command runs while none does.
// APIKey describes an API key of the records, never the key itself.
type APIKey struct {
	// ID identifies the key, as does its Name.
	ID   string `json:"id"`
	Name string `json:"name"`
	// OrganizationID is the organization whose sandboxes the key reaches.
	OrganizationID string    `json:"organizationId"`
	CreatedAt      time.Time `json:"createdAt"`
}

// storedKey is an API key as the store keeps it.
type storedKey struct {
	APIKey
	Hash string `json:"sha256"` // hex
}

// storedOrg is an organization as the store keeps it.
type storedOrg struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
}

// keyPrefix starts every API key, as Daytona's do.
const keyPrefix = "dtn_"

// CreateAPIKey creates an API key of organization org
// (DefaultOrganizationID when empty) in the records of stateDir, named
// name (its id's start when empty), and returns it with the key itself,
// which cannot be shown again. A name must be unique. It fails with an
// error matching ErrStoreInUse while a server runs on stateDir: the
// servers started later accept the key.
func CreateAPIKey(ctx context.Context, stateDir, name, org string) (APIKey, string, error) {
	if org == "" {
		org = DefaultOrganizationID
	}
	if local.ValidateID(org) != nil {
		return APIKey{}, "", fmt.Errorf("organization %q is invalid: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit: %w", org, sandbox.ErrInvalidArgument)
	}
	if strings.ContainsFunc(name, func(c rune) bool { return c < ' ' }) || len(name) > 255 {
		return APIKey{}, "", fmt.Errorf("key name %q is invalid: at most 255 characters, no control characters: %w", name, sandbox.ErrInvalidArgument)
	}
	var secret [32]byte
	_, _ = rand.Read(secret[:]) // never fails (crypto/rand)
	key := keyPrefix + hex.EncodeToString(secret[:])
	hash := sha256.Sum256([]byte(key))
	k := storedKey{APIKey: APIKey{ID: newID(), Name: name, OrganizationID: org, CreatedAt: time.Now().UTC()}, Hash: hex.EncodeToString(hash[:])}
	if k.Name == "" {
		k.Name = "key-" + k.ID[:8]
	}
	err := updateKeys(ctx, stateDir, func(kf *keysFile) error {
		if slices.ContainsFunc(kf.Keys, func(o storedKey) bool { return o.Name == k.Name }) {
			return fmt.Errorf("an API key named %q exists: choose another name, or remove it first: %w", k.Name, sandbox.ErrInvalidArgument)
		}
		if !slices.ContainsFunc(kf.Orgs, func(o storedOrg) bool { return o.ID == org }) {
			kf.Orgs = append(kf.Orgs, storedOrg{ID: org, CreatedAt: k.CreatedAt})
		}
		kf.Keys = append(kf.Keys, k)
		return nil
	})
	if err != nil {
		return APIKey{}, "", err
	}
	return k.APIKey, key, nil
}

// ListAPIKeys returns the API keys of the records of stateDir (never the
// keys themselves), oldest first.
func ListAPIKeys(ctx context.Context, stateDir string) ([]APIKey, error) {
	if err := prepareKeys(ctx, stateDir); err != nil {
		return nil, err
	}
	kf, _, err := readKeysFile(keysPath(stateDir))
	if err != nil {
		return nil, err
	}
	var out []APIKey
	for _, k := range kf.sorted() {
		out = append(out, k.APIKey)
	}
	return out, nil
}

// RemoveAPIKey removes the API key with id or name idOrName from the
// records of stateDir; an error matching sandbox.ErrNotFound says there
// is none. A server running on stateDir refuses the key from its next
// request on.
func RemoveAPIKey(ctx context.Context, stateDir, idOrName string) error {
	return updateKeys(ctx, stateDir, func(kf *keysFile) error {
		i := slices.IndexFunc(kf.Keys, func(k storedKey) bool { return k.ID == idOrName || k.Name == idOrName })
		if i < 0 {
			return fmt.Errorf("no API key with id or name %q (agentbox serve keys ls lists them): %w", idOrName, sandbox.ErrNotFound)
		}
		kf.Keys = slices.Delete(kf.Keys, i, i+1)
		return nil
	})
}

// apiKeysOf returns the keys the server accepts of kf.
func apiKeysOf(kf *keysFile) ([]apiKey, error) {
	out := make([]apiKey, 0, len(kf.Keys))
	for _, k := range kf.Keys {
		ak := apiKey{org: k.OrganizationID, name: k.Name}
		h, err := hex.DecodeString(k.Hash)
		if err != nil || len(h) != len(ak.hash) {
			return nil, fmt.Errorf("agentbox serve: API key %s: its hash is damaged: remove it (agentbox serve keys rm %s)", k.ID, k.ID)
		}
		copy(ak.hash[:], h)
		out = append(out, ak)
	}
	return out, nil
}
