package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
	"github.com/spf13/pflag"
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

// resourceFlags are --cpu, --memory, --disk and --pids: a new sandbox's
// limits, each read by the sandbox package's one parser of its kind.
type resourceFlags struct{ sandbox.Resources }

// add registers the flags on fs.
func (r *resourceFlags) add(fs *pflag.FlagSet) {
	fs.Var(resourceFlag{func(s string) (err error) { r.CPUCores, err = sandbox.ParseCPUCores(s); return }}, "cpu",
		"create the sandbox with this many CPU `CORES` (fractions allowed on the local engine, e.g. 0.5; Daytona takes whole cores)")
	fs.Var(resourceFlag{func(s string) (err error) { r.MemoryMiB, err = sandbox.ParseSizeMiB(s); return }}, "memory",
		"create the sandbox with this much `MEMORY`: a number of MiB (512), or with a unit: 512MiB, 2GiB (Daytona takes whole GiB)")
	fs.Var(resourceFlag{func(s string) (err error) { r.DiskMiB, err = sandbox.ParseSizeMiB(s); return }}, "disk",
		"create the sandbox with a disk of this `SIZE`: a number of MiB (4096), or with a unit: 512MiB, 4GiB (Daytona takes whole GiB)")
	fs.Var(resourceFlag{func(s string) (err error) { r.PIDs, err = sandbox.ParsePIDs(s); return }}, "pids",
		"create the sandbox with at most this many processes and threads (`N`; local engine)")
}

// resourceFlag is one of resourceFlags: set parses the value into its
// field.
type resourceFlag struct{ set func(string) error }

func (f resourceFlag) String() string { return "" }

func (f resourceFlag) Set(s string) error {
	if err := f.set(s); err != nil {
		// pflag names the flag and the value; the text says what to write.
		return errors.New(strings.TrimPrefix(err.Error(), sandbox.ErrInvalidArgument.Error()+": "))
	}
	return nil
}

func (f resourceFlag) Type() string { return "value" }
