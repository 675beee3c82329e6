package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/hostname"
)

// Secret is a value that a sandbox's commands may send to some hosts but
// never read. The sandbox's environment holds the variable Name set to an
// opaque placeholder, random per sandbox and per secret; the engine's
// egress proxy replaces the placeholder with Value in requests that leave
// the sandbox for one of Hosts, and nowhere else. Value never enters the
// sandbox: not its environment, files, process list nor /proc.
//
// A Secret formats (fmt's %v, %+v, %#v, %s) and logs (log/slog) without
// its Value, and encodes to JSON without it.
type Secret struct {
	// Name is the environment variable that holds the placeholder: a
	// shell name, letters, digits and '_', not starting with a digit.
	Name string `json:"name"`
	// Value is what the placeholder stands for: at most MaxSecretValue
	// bytes, not empty, no NUL or line break (it travels in HTTP
	// headers).
	Value string `json:"-"`
	// Hosts are the hosts the value may be sent to: names
	// ("api.example.com") and wildcards ("*.example.com", every name
	// below example.com at any depth, not example.com itself), without
	// ports; case and a trailing dot do not matter. At least one.
	Hosts []string `json:"hosts"`
	// AllowHTTP lets the value go to Hosts over cleartext HTTP too; by
	// default it is substituted only in requests sent over TLS to the
	// host, whose certificate the proxy verifies.
	AllowHTTP bool `json:"allowHTTP,omitempty"`
}

// MaxSecretValue is the largest Secret.Value, in bytes (Daytona's limit).
const MaxSecretValue = 64 << 10

// MaxSecretHosts is the most hosts a Secret lists.
const MaxSecretHosts = 100

// ErrInvalidSecret is matched (errors.Is) by every error about a Secret
// that is not valid; such errors match ErrInvalidArgument too.
var ErrInvalidSecret = fmt.Errorf("%w: invalid secret", ErrInvalidArgument)

// envName is what a Secret's Name must look like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports what is wrong with s, with an error matching
// ErrInvalidSecret that names the secret and says what to do, or nil.
// The error never contains the value.
func (s Secret) Validate() error {
	_, err := s.Canonical()
	return err
}

// Canonical returns s validated, with its Hosts in canonical form (lower
// case, no trailing dot, no duplicates, in the order given).
func (s Secret) Canonical() (Secret, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidSecret, hostname.Printable(s.Name), fmt.Sprintf(format, a...))
	}
	if !envName.MatchString(s.Name) {
		return s, bad("the name is the environment variable that holds its placeholder: use letters, digits and '_', not starting with a digit (e.g. OPENAI_API_KEY)")
	}
	switch {
	case s.Value == "":
		return s, bad("the value is empty: give the value to substitute")
	case len(s.Value) > MaxSecretValue:
		return s, bad("the value is %d bytes, more than the %d (64 KiB) a secret may hold", len(s.Value), MaxSecretValue)
	case strings.ContainsAny(s.Value, "\x00\r\n"):
		return s, bad("the value holds a NUL or line break, which no HTTP header may carry: remove it")
	}
	if len(s.Hosts) == 0 {
		return s, bad("no hosts: list the hosts the value may be sent to (api.example.com, *.example.com)")
	}
	if len(s.Hosts) > MaxSecretHosts {
		return s, bad("%d hosts, more than %d: use a wildcard (*.example.com) for many names of one domain", len(s.Hosts), MaxSecretHosts)
	}
	hosts := make([]string, 0, len(s.Hosts))
	seen := map[string]bool{}
	for _, h := range s.Hosts {
		canon, _, err := hostname.ParsePattern(strings.TrimSpace(h))
		if err != nil {
			return s, bad("host %q is not a host name or *.name pattern (no scheme, port, path or IP address): %v", hostname.Printable(h), err)
		}
		if !seen[canon] {
			seen[canon] = true
			hosts = append(hosts, canon)
		}
	}
	s.Hosts = hosts
	return s, nil
}

// Allows reports whether the secret may be sent to host (a name, any
// case, with or without a trailing dot). IP literals never match.
func (s Secret) Allows(host string) bool {
	name, err := hostname.Canonical(host)
	if err != nil || hostname.IsIPLiteral(name) {
		return false
	}
	for _, h := range s.Hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			if strings.HasSuffix(name, "."+rest) {
				return true
			}
		} else if name == h {
			return true
		}
	}
	return false
}

// Format prints s without its value: the fmt verbs all give
// "Secret{Name: N, Hosts: [h…], Value: <redacted>}".
func (s Secret) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "Secret{Name: %q, Hosts: %q, AllowHTTP: %t, Value: <redacted>}", s.Name, s.Hosts, s.AllowHTTP)
}

// LogValue logs s without its value.
func (s Secret) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", s.Name), slog.Any("hosts", s.Hosts), slog.Bool("allowHTTP", s.AllowHTTP))
}

// CanonicalSecrets validates secrets (each, and that no two share a Name)
// and returns them in canonical form. It returns nil for none.
func CanonicalSecrets(secrets []Secret) ([]Secret, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	out := make([]Secret, 0, len(secrets))
	seen := map[string]bool{}
	var errs []error
	for _, s := range secrets {
		c, err := s.Canonical()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("%w %q: given twice: each environment variable holds one secret", ErrInvalidSecret, c.Name))
			continue
		}
		seen[c.Name] = true
		out = append(out, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// SecretInfo describes a secret a sandbox holds, without its value: what
// Info reports.
type SecretInfo struct {
	// Name is the environment variable.
	Name string `json:"name"`
	// Hosts are the hosts its value goes to.
	Hosts []string `json:"hosts"`
	// AllowHTTP is whether it goes over cleartext HTTP too.
	AllowHTTP bool `json:"allowHTTP,omitempty"`
}
