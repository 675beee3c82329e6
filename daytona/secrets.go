package daytona

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/hostname"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// Secrets of an organization (issue 28), over Daytona's /secret routes:
// values a sandbox's commands may send to some hosts but never read
// (Options.Secrets). A value goes to the server once, at Create or
// Update, and is never answered back; no type of this file formats, logs
// or reports one. Errors are the API's *APIError, wrapped with what was
// being done: 404 matches ErrNotFound and sandbox.ErrNotFound, 409 (a
// name taken) ErrConflict.

// secretName is what a secret's name must look like (api.json
// CreateSecret: alphanumeric, hyphens, underscores).
var secretName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]*$`)

// Secret is a secret as the API describes it (api.json Secret): never its
// value. Placeholder is what a sandbox's environment variable holds.
type Secret struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Placeholder string   `json:"placeholder"`
	Hosts       []string `json:"hosts"`
	CreatedAt   string   `json:"createdAt"`
	UpdatedAt   string   `json:"updatedAt"`
}

// SecretSpec is a new secret. Its Value is never formatted (fmt's verbs
// print it redacted), logged nor JSON-encoded but in the create request.
type SecretSpec struct {
	// Name is the secret's name: letters, digits, '_' and '-', not
	// starting with a digit or '-'.
	Name string
	// Value is what the placeholder stands for: not empty, at most
	// sandbox.MaxSecretValue bytes, no NUL or line break.
	Value string `json:"-"`
	// Description is a note on the secret.
	Description string
	// Hosts are the hosts the value may be sent to: names and "*.name"
	// wildcards, at least one.
	Hosts []string
}

// Format prints s without its value.
func (s SecretSpec) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "SecretSpec{Name: %q, Hosts: %q, Description: %q, Value: <redacted>}", s.Name, s.Hosts, s.Description)
}

// LogValue logs s without its value.
func (s SecretSpec) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", s.Name), slog.Any("hosts", s.Hosts))
}

// SecretUpdate changes a secret; nil fields keep their values.
type SecretUpdate struct {
	// Value is the new value (checked as SecretSpec.Value).
	Value *string `json:"-"`
	// Description is the new description.
	Description *string
	// Hosts are the new hosts (checked as SecretSpec.Hosts).
	Hosts []string
}

// Format prints u without its value.
func (u SecretUpdate) Format(f fmt.State, _ rune) {
	desc := "<unchanged>"
	if u.Description != nil {
		desc = strconv.Quote(*u.Description)
	}
	value := "<unchanged>"
	if u.Value != nil {
		value = "<redacted>"
	}
	fmt.Fprintf(f, "SecretUpdate{Hosts: %q, Description: %s, Value: %s}", u.Hosts, desc, value)
}

// LogValue logs u without its value.
func (u SecretUpdate) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("hosts", u.Hosts), slog.Bool("value", u.Value != nil))
}

// ListSecretsOptions are a page's place, size, filter and order.
type ListSecretsOptions struct {
	// Cursor is the NextCursor of the page before; "" for the first.
	Cursor string
	// Limit is the page's size (1–200); 0: the server's (100).
	Limit int
	// Name keeps the secrets whose name contains it.
	Name string
	// Sort is "name", "createdAt" (the server's default) or "updatedAt".
	Sort string
	// Order is "asc" or "desc" (the server's default).
	Order string
}

// SecretList is one page of secrets (api.json ListSecretsResponse);
// NextCursor is nil or "" on the last.
type SecretList struct {
	Items      []Secret `json:"items"`
	Total      int      `json:"total"`
	NextCursor *string  `json:"nextCursor"`
}

// SecretsService is the organization's secrets (Client.Secrets).
type SecretsService struct{ c *Client }

// Secrets returns the organization's secrets.
func (c *Client) Secrets() *SecretsService { return &SecretsService{c: c} }

// createSecretBody and updateSecretBody are the wire forms, the only
// places a value is encoded.
type createSecretBody struct {
	Name        string   `json:"name"`
	Value       string   `json:"value"`
	Description string   `json:"description,omitempty"`
	Hosts       []string `json:"hosts,omitempty"`
}

type updateSecretBody struct {
	Value       *string  `json:"value,omitempty"`
	Description *string  `json:"description,omitempty"`
	Hosts       []string `json:"hosts,omitempty"`
}

// Create makes the secret spec and returns it. A name taken is an error
// matching ErrConflict; bad input (checked before anything is sent)
// sandbox.ErrInvalidArgument.
func (s *SecretsService) Create(ctx context.Context, spec SecretSpec) (*Secret, error) {
	if !secretName.MatchString(spec.Name) {
		return nil, fmt.Errorf("daytona: secret %q: %w: a name holds letters, digits, '_' and '-', not starting with a digit or '-' (e.g. OPENAI_API_KEY)", hostname.Printable(spec.Name), sandbox.ErrInvalidArgument)
	}
	hosts, err := checkSecret(spec.Name, spec.Value, spec.Hosts)
	if err != nil {
		return nil, err
	}
	var out Secret
	body := createSecretBody{Name: spec.Name, Value: spec.Value, Description: spec.Description, Hosts: hosts}
	if err := s.c.do(ctx, call{method: "POST", path: "/secret", body: body}, &out); err != nil {
		return nil, fmt.Errorf("daytona: creating secret %s: %w", spec.Name, scrub(err, spec.Value))
	}
	return &out, nil
}

// List returns one page of secrets (GET /secret/paginated).
func (s *SecretsService) List(ctx context.Context, o ListSecretsOptions) (*SecretList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"cursor": o.Cursor, "name": o.Name, "sort": o.Sort, "order": o.Order} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var out SecretList
	if err := s.c.do(ctx, call{method: "GET", path: "/secret/paginated", query: q, idempotent: true}, &out); err != nil {
		return nil, fmt.Errorf("daytona: listing secrets: %w", err)
	}
	return &out, nil
}

// All iterates over every secret, page after page. It stops at the first
// error, which it yields.
func (s *SecretsService) All(ctx context.Context) iter.Seq2[*Secret, error] {
	return s.pages(ctx, ListSecretsOptions{Limit: 200})
}

// pages iterates over the secrets o's filter keeps, from o's cursor on.
func (s *SecretsService) pages(ctx context.Context, o ListSecretsOptions) iter.Seq2[*Secret, error] {
	return cursorPages(func(cursor string) ([]Secret, *string, error) {
		if cursor != "" {
			o.Cursor = cursor
		}
		page, err := s.List(ctx, o)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// Get returns the secret with id.
func (s *SecretsService) Get(ctx context.Context, id string) (*Secret, error) {
	var out Secret
	if err := s.c.do(ctx, call{method: "GET", path: "/secret/" + escape(id), idempotent: true}, &out); err != nil {
		return nil, fmt.Errorf("daytona: secret %s: %w", id, err)
	}
	return &out, nil
}

// ByName returns the secret named name (exactly), found with the list's
// name filter; none is an error matching ErrNotFound and
// sandbox.ErrNotFound.
func (s *SecretsService) ByName(ctx context.Context, name string) (*Secret, error) {
	for sec, err := range s.pages(ctx, ListSecretsOptions{Name: name, Limit: 200}) {
		if err != nil {
			return nil, err
		}
		if sec.Name == name {
			return sec, nil
		}
	}
	return nil, fmt.Errorf("daytona: no secret named %q: %w (%w)", name, ErrNotFound, sandbox.ErrNotFound)
}

// Update changes the secret id as u says and returns it. Bad input
// (checked before anything is sent) matches sandbox.ErrInvalidArgument.
func (s *SecretsService) Update(ctx context.Context, id string, u SecretUpdate) (*Secret, error) {
	body := updateSecretBody{Value: u.Value, Description: u.Description}
	value := ""
	if u.Value != nil || u.Hosts != nil {
		probe := "x" // a valid value, when only the hosts are checked
		if u.Value != nil {
			probe, value = *u.Value, *u.Value
		}
		hosts := u.Hosts
		if hosts == nil {
			hosts = []string{"example.com"}
		}
		checked, err := checkSecret(id, probe, hosts)
		if err != nil {
			return nil, err
		}
		if u.Hosts != nil {
			body.Hosts = checked
		}
	}
	var out Secret
	if err := s.c.do(ctx, call{method: "PATCH", path: "/secret/" + escape(id), body: body, idempotent: true}, &out); err != nil {
		return nil, fmt.Errorf("daytona: updating secret %s: %w", id, scrub(err, value))
	}
	return &out, nil
}

// Delete deletes the secret id. Sandboxes holding it lose it.
func (s *SecretsService) Delete(ctx context.Context, id string) error {
	if err := s.c.do(ctx, call{method: "DELETE", path: "/secret/" + escape(id), idempotent: true}, nil); err != nil {
		return fmt.Errorf("daytona: deleting secret %s: %w", id, err)
	}
	return nil
}

// UpdateSandboxSecrets replaces the secrets of sandbox idOrName (PUT
// /sandbox/{id}/secrets): env → secret name; none detaches them all.
func (c *Client) UpdateSandboxSecrets(ctx context.Context, idOrName string, secrets map[string]string) (*SandboxDTO, error) {
	if err := checkSecretRefs(secrets); err != nil {
		return nil, fmt.Errorf("daytona: sandbox %s: secrets: %w", idOrName, err)
	}
	refs := secretRefs(secrets)
	if refs == nil {
		refs = []map[string]string{} // the spec's way to detach all
	}
	body := struct {
		Secrets []map[string]string `json:"secrets"`
	}{refs}
	var out SandboxDTO
	return &out, c.do(ctx, call{method: "PUT", path: "/sandbox/" + escape(idOrName) + "/secrets", body: body, idempotent: true}, &out)
}

// UpdateSecrets replaces the started sandbox's secrets (Options.Secrets:
// env → secret name), live: commands started afterwards see the new
// placeholders. Later clones, and a sandbox made again, get them.
func (s *Sandbox) UpdateSecrets(ctx context.Context, secrets map[string]string) error {
	id, err := s.remoteFor("UpdateSecrets")
	if err != nil {
		return err
	}
	if _, err := s.api.UpdateSandboxSecrets(ctx, id, secrets); err != nil {
		return fmt.Errorf("daytona: updating the secrets of sandbox %s: %w", s.opts.Name, err)
	}
	s.mu.Lock()
	s.opts.Secrets = cloneRefs(secrets)
	s.mu.Unlock()
	return nil
}

// cloneRefs copies secret references, nil for none.
func cloneRefs(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// checkSecretRefs checks env → secret name references. Errors match
// sandbox.ErrInvalidArgument (sandbox.ErrInvalidEnv for a variable).
func checkSecretRefs(refs map[string]string) error {
	var errs []error
	for _, env := range sortedKeys(refs) {
		switch {
		case !sandbox.ValidEnvName(env):
			errs = append(errs, fmt.Errorf("variable %q: %w: use letters, digits and '_', not starting with a digit", hostname.Printable(env), sandbox.ErrInvalidEnv))
		case !secretName.MatchString(refs[env]):
			errs = append(errs, fmt.Errorf("%s: secret name %q: %w: a name holds letters, digits, '_' and '-', not starting with a digit or '-'", env, hostname.Printable(refs[env]), sandbox.ErrInvalidArgument))
		}
	}
	if len(errs) > 0 && !errors.Is(errors.Join(errs...), sandbox.ErrInvalidArgument) {
		errs = append(errs, sandbox.ErrInvalidArgument)
	}
	return errors.Join(errs...)
}

// secretRefs returns refs in the wire form, one-key maps sorted by
// variable; nil for none.
func secretRefs(refs map[string]string) []map[string]string {
	var out []map[string]string
	for _, env := range sortedKeys(refs) {
		out = append(out, map[string]string{env: refs[env]})
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkSecret checks a secret's value and hosts as sandbox.Secret does
// and returns the hosts in canonical form. Errors match
// sandbox.ErrInvalidArgument and never hold the value.
func checkSecret(name, value string, hosts []string) ([]string, error) {
	// sandbox.Secret's rules, under a name it accepts: the name is checked
	// by the caller with Daytona's rule, which allows '-'.
	c, err := sandbox.Secret{Name: "SECRET", Value: value, Hosts: hosts}.Canonical()
	if err != nil {
		msg := strings.Replace(err.Error(), `"SECRET"`, strconv.Quote(hostname.Printable(name)), 1)
		return nil, fmt.Errorf("daytona: secret %s: %w", strings.TrimPrefix(msg, sandbox.ErrInvalidSecret.Error()+" "), sandbox.ErrInvalidSecret)
	}
	return c.Hosts, nil
}

// scrub returns err without value in its text, should a server echo it.
func scrub(err error, value string) error {
	var ae *APIError
	if value == "" || !errors.As(err, &ae) || !strings.Contains(ae.Message+ae.Code, value) {
		return err
	}
	clean := *ae
	clean.Message = strings.ReplaceAll(ae.Message, value, "<redacted>")
	clean.Code = strings.ReplaceAll(ae.Code, value, "<redacted>")
	return &clean
}
