package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// parseEnv turns --env NAME=VALUE flags into a map. Its errors name the
// flag by position and the variable by name, never by value: values are
// often secrets, and an argument without '=' may be a value given alone.
func parseEnv(flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(flags))
	for i, kv := range flags {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usagef("--env #%d has no '=': write --env NAME=VALUE (the value is not shown here)", i+1)
		}
		if !sandbox.ValidEnvName(name) {
			return nil, usagef("--env #%d: invalid variable name %s: names must match [A-Za-z_][A-Za-z0-9_]* (write --env NAME=VALUE)", i+1, quoteName(name))
		}
		env[name] = value
	}
	return env, nil
}

// quoteName quotes an environment variable name for an error message,
// shortening a long one: a long "name" is more likely a misplaced value.
func quoteName(name string) string {
	const max = 32
	if len(name) > max {
		return strconv.Quote(name[:8]+"…") + fmt.Sprintf(" (%d bytes)", len(name))
	}
	return strconv.Quote(name)
}

// timeoutValue is the --timeout flag: a non-negative Go duration.
type timeoutValue struct {
	d   time.Duration
	set bool
}

func (v *timeoutValue) String() string {
	if !v.set {
		return ""
	}
	return v.d.String()
}

func (v *timeoutValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, nerr := strconv.Atoi(s); nerr == nil && n >= 0 {
			return fmt.Errorf("a duration needs a unit: write %ds for %d seconds", n, n)
		}
		return fmt.Errorf("not a duration: write one such as 30s, 5m or 1h30m")
	}
	if d < 0 {
		return fmt.Errorf("must not be negative: write 0 for no timeout")
	}
	v.d, v.set = d, true
	return nil
}

func (v *timeoutValue) Type() string { return "duration" }

// execTimeout maps the flag to ExecOptions.Timeout: unset is the sandbox
// default (0), an explicit 0 means no timeout (negative).
func (v *timeoutValue) execTimeout() time.Duration {
	switch {
	case !v.set:
		return 0
	case v.d == 0:
		return -1
	default:
		return v.d
	}
}
