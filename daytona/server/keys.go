package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
// holds, so a slow password hash would add nothing. A server reads the
// keys when it starts; while one runs, it holds the records (ErrStoreInUse)
// and the keys cannot change.

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
	err := withStore(ctx, stateDir, func(st *store) error {
		keys, err := storedKeys(st)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(keys, func(o storedKey) bool { return o.Name == k.Name }) {
			return fmt.Errorf("an API key named %q exists: choose another name, or remove it first: %w", k.Name, sandbox.ErrInvalidArgument)
		}
		if err := st.putIfAbsent(bucketOrgs, org, storedOrg{ID: org, CreatedAt: k.CreatedAt}); err != nil {
			return err
		}
		return st.put(bucketKeys, k.ID, k)
	})
	if err != nil {
		return APIKey{}, "", err
	}
	return k.APIKey, key, nil
}

// ListAPIKeys returns the API keys of the records of stateDir (never the
// keys themselves), oldest first.
func ListAPIKeys(ctx context.Context, stateDir string) ([]APIKey, error) {
	var out []APIKey
	err := withStore(ctx, stateDir, func(st *store) error {
		keys, err := storedKeys(st)
		for _, k := range keys {
			out = append(out, k.APIKey)
		}
		return err
	})
	return out, err
}

// RemoveAPIKey removes the API key with id or name idOrName from the
// records of stateDir; an error matching sandbox.ErrNotFound says there
// is none.
func RemoveAPIKey(ctx context.Context, stateDir, idOrName string) error {
	return withStore(ctx, stateDir, func(st *store) error {
		keys, err := storedKeys(st)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(keys, func(k storedKey) bool { return k.ID == idOrName || k.Name == idOrName })
		if i < 0 {
			return fmt.Errorf("no API key with id or name %q (agentbox serve keys ls lists them): %w", idOrName, sandbox.ErrNotFound)
		}
		return st.remove(bucketKeys, keys[i].ID)
	})
}

// withStore runs fn with the store of stateDir, open for the while.
func withStore(ctx context.Context, stateDir string, fn func(*store) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := local.CheckStateDir(stateDir); err != nil {
		return fmt.Errorf("agentbox serve: %w", err)
	}
	st, err := openStore(stateDir)
	if err != nil {
		return err
	}
	err = fn(st)
	if cerr := st.close(); err == nil && cerr != nil {
		err = fmt.Errorf("agentbox serve: closing the records: %w", cerr)
	}
	return err
}

// storedKeys returns the keys of st, oldest first.
func storedKeys(st *store) ([]storedKey, error) {
	var keys []storedKey
	err := st.each(bucketKeys, func(id string, data []byte) error {
		var k storedKey
		if err := json.Unmarshal(data, &k); err != nil {
			return fmt.Errorf("agentbox serve: reading API key %s: %w", id, err)
		}
		keys = append(keys, k)
		return nil
	})
	slices.SortFunc(keys, func(a, b storedKey) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return keys, err
}

// loadKeys adds the keys of the store to the server's.
func (s *Server) loadKeys() error {
	keys, err := storedKeys(s.store)
	if err != nil {
		return err
	}
	for _, k := range keys {
		ak := apiKey{org: k.OrganizationID}
		if h, err := hex.DecodeString(k.Hash); err != nil || copy(ak.hash[:], h) != len(ak.hash) || len(h) != len(ak.hash) {
			return fmt.Errorf("agentbox serve: API key %s: its hash is damaged: remove it (agentbox serve keys rm %s)", k.ID, k.ID)
		}
		s.keys = append(s.keys, ak)
	}
	return nil
}
