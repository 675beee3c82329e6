package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/seal"
	"github.com/agentbox-dev/agentbox/sandbox"
	bolt "go.etcd.io/bbolt"
)

// Secrets of organizations (Daytona's /secret): a name, a value, the
// hosts the value may be sent to and a description. Their records are in
// the store's bucket "secrets", by id; the value is sealed there
// (internal/seal: AES-256-GCM, the record's id as the additional data)
// with the key of serve/secrets.key, a file of its own (mode 0600) beside
// the records, never in them: whoever reads records.db learns a value's
// length only. The value is opened only to hand it to the engine
// (resolve); no answer, log line or error ever holds it.

// bucketSecrets holds the secrets' records, by id.
var bucketSecrets = []byte("secrets")

// secretsKeyFile is the key file's path under the state dir.
const secretsKeyFile = "serve/secrets.key"

// Bounds of secrets.
const (
	// maxSecretsPerOrg is how many secrets an organization may have.
	maxSecretsPerOrg = 500
	// maxSecretName is the longest secret name, in bytes.
	maxSecretName = 128
	// maxSecretDescription is the longest description, in bytes.
	maxSecretDescription = 1024
)

// secretName is Daytona's rule for secret names.
var secretName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)

// secretRecord is one secret. Its fields are guarded by secretSet.mu.
type secretRecord struct {
	id, org, name string
	description   string
	hosts         []string
	sealed        []byte // the value, sealed with the set's box
	createdAt     time.Time
	updatedAt     time.Time
}

// storedSecret is a secret's record as the store keeps it.
type storedSecret struct {
	ID          string    `json:"id"`
	Org         string    `json:"organizationId"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Hosts       []string  `json:"hosts"`
	Sealed      []byte    `json:"sealedValue"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// secretSet is the server's secrets.
type secretSet struct {
	box *seal.Box

	mu     sync.Mutex
	byID   map[string]*secretRecord
	byName map[string]*secretRecord // by nameKey(org, name)
}

// openSecrets opens the key file of stateDir (making it the first time)
// and reads the secrets' records.
func (s *Server) openSecrets(stateDir string) error {
	box, err := seal.OpenKeyFile(filepath.Join(stateDir, secretsKeyFile))
	if err != nil {
		return fmt.Errorf("agentbox serve: the secrets' key file: %w", err)
	}
	s.secrets = secretSet{box: box, byID: map[string]*secretRecord{}, byName: map[string]*secretRecord{}}
	err = s.store.update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketSecrets)
		return err
	})
	if err == nil {
		err = s.store.each(bucketSecrets, func(id string, data []byte) error {
			var ss storedSecret
			if err := json.Unmarshal(data, &ss); err != nil {
				return fmt.Errorf("secret %s: %w", id, err)
			}
			sr := &secretRecord{id: ss.ID, org: ss.Org, name: ss.Name, description: ss.Description, hosts: ss.Hosts,
				sealed: ss.Sealed, createdAt: ss.CreatedAt, updatedAt: ss.UpdatedAt}
			s.secrets.byID[sr.id], s.secrets.byName[nameKey(sr.org, sr.name)] = sr, sr
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("agentbox serve: reading the secrets' records: %w", err)
	}
	return nil
}

// sealContext is the additional data a secret's value is sealed with:
// its record's id, so that a sealed value moved to another record does
// not open.
func sealContext(id string) []byte { return []byte("agentbox serve secret " + id) }

// saveSecret queues the write of sr's record. Called with
// s.secrets.mu held, which
// orders the writes of a secret.
func (s *Server) saveSecret(sr *secretRecord) *storeWrite {
	data, err := json.Marshal(storedSecret{ID: sr.id, Org: sr.org, Name: sr.name, Description: sr.description, Hosts: sr.hosts,
		Sealed: sr.sealed, CreatedAt: sr.createdAt, UpdatedAt: sr.updatedAt})
	if err != nil {
		// Plain data: cannot happen.
		s.logf("agentbox serve: encoding the record of secret %s: %v", sr.id, err)
		return nil
	}
	id := sr.id
	return s.store.putAsync(bucketSecrets, id, data, nil, func(err error) {
		s.logf("agentbox serve: recording secret %s: %v", id, err)
	})
}

// checkSecretValue checks value and hosts by sandbox.Secret's rules (not
// empty, at most 64 KiB, no NUL or line break; host names and *.name
// patterns) and returns the hosts in canonical form. The error never
// holds the value.
func checkSecretValue(value string, hosts []string) ([]string, error) {
	const probe = "_"
	c, err := sandbox.Secret{Name: probe, Value: value, Hosts: hosts}.Canonical()
	if err != nil {
		msg, _ := strings.CutPrefix(err.Error(), fmt.Sprintf("%v %q: ", sandbox.ErrInvalidSecret, probe))
		return nil, &httpError{Status: http.StatusBadRequest, Message: msg, Err: sandbox.ErrInvalidSecret}
	}
	return c.Hosts, nil
}

// checkSecretName refuses a name that is not Daytona's secret name.
func checkSecretName(name string) error {
	if name == "" {
		return errorf(http.StatusBadRequest, "name is required: letters, digits, '_' and '-', not starting with a digit or '-' (e.g. OPENAI_API_KEY)")
	}
	if len(name) > maxSecretName || !secretName.MatchString(name) {
		return errorf(http.StatusBadRequest, "name %q is invalid: use at most %d letters, digits, '_' and '-', not starting with a digit or '-' (e.g. OPENAI_API_KEY)", name, maxSecretName)
	}
	return nil
}

// checkDescription refuses a description past maxSecretDescription.
func checkDescription(d string) error {
	if len(d) > maxSecretDescription {
		return errorf(http.StatusBadRequest, "description is %d bytes, more than the %d a secret's description may have: shorten it", len(d), maxSecretDescription)
	}
	return nil
}

// find returns organization org's secret idOrName (its id, or its name);
// 404 for any other. Called with ss.mu held.
func (ss *secretSet) find(org, idOrName string) (*secretRecord, error) {
	if sr := ss.byID[idOrName]; sr != nil && sr.org == org {
		return sr, nil
	}
	if sr := ss.byName[nameKey(org, idOrName)]; sr != nil {
		return sr, nil
	}
	return nil, errorf(http.StatusNotFound, "Secret %s not found", idOrName)
}

// add adds sr, new, after checking that its name is free in its
// organization and that the organization has room. Called with ss.mu
// held.
func (ss *secretSet) add(sr *secretRecord) error {
	if ss.byName[nameKey(sr.org, sr.name)] != nil {
		return errorf(http.StatusConflict, "Secret with name %s already exists", sr.name)
	}
	n := 0
	for _, o := range ss.byID {
		if o.org == sr.org {
			n++
		}
	}
	if n >= maxSecretsPerOrg {
		return errorf(http.StatusForbidden, "Secret quota exceeded: organization %s has %d secrets, the most agentbox serve allows: delete some first", sr.org, n)
	}
	ss.byID[sr.id], ss.byName[nameKey(sr.org, sr.name)] = sr, sr
	return nil
}

// secretRef is one secret a sandbox holds: the environment variable Env
// set to a placeholder of organization's secret Name.
type secretRef struct {
	Env  string `json:"env"`
	Name string `json:"name"`
}

// resolve returns the secrets refs name in organization org, with their
// values, as the engine takes them; an unknown name is a 400 naming it.
func (ss *secretSet) resolve(org string, refs []secretRef) ([]sandbox.Secret, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make([]sandbox.Secret, 0, len(refs))
	var missing []string
	for _, ref := range refs {
		sr := ss.byName[nameKey(org, ref.Name)]
		if sr == nil {
			missing = append(missing, ref.Name)
			continue
		}
		value, err := ss.box.Open(sr.sealed, sealContext(sr.id))
		if err != nil {
			return nil, fmt.Errorf("agentbox serve: secret %s: %w (was serve/secrets.key replaced?)", sr.name, err)
		}
		out = append(out, sandbox.Secret{Name: ref.Env, Value: string(value), Hosts: slices.Clone(sr.hosts)})
	}
	if len(missing) > 0 {
		return nil, errorf(http.StatusBadRequest, "Secret %s not found in the organization: create it first (POST /secret)", strings.Join(missing, ", "))
	}
	return out, nil
}

// errSecretInUse is the cause of a refused deletion of a secret that
// sandboxes hold.
var errSecretInUse = errors.New("secret in use")
