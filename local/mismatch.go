package local

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// ErrConfigMismatch reports that a handle asked for a Config that differs
// from the one its existing sandbox was created with; see
// [ConfigMismatchError].
var ErrConfigMismatch = errors.New("config differs from the existing sandbox's")

// ConfigMismatchError is the error of Start when the sandbox exists and a
// field of the handle's [Config] is set (not its zero value) to a value
// other than the one the sandbox was created with. It matches
// [ErrConfigMismatch] and [sandbox.ErrInvalidArgument].
type ConfigMismatchError struct {
	// ID and StateDir name the sandbox.
	ID       string
	StateDir string
	// Fields lists every differing field, in the order of Config.
	Fields []FieldMismatch
}

// FieldMismatch is one differing field of a [ConfigMismatchError].
type FieldMismatch struct {
	// Field is the name of the Config field, e.g. "Network".
	Field string
	// Sandbox is the sandbox's value, Requested the handle's (with the
	// defaults of a new sandbox filled in).
	Sandbox, Requested any
}

func (e *ConfigMismatchError) Error() string {
	diffs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		diffs[i] = fmt.Sprintf("%s is %s, not %s", f.Field, showValue(f.Sandbox), showValue(f.Requested))
	}
	return fmt.Sprintf("sandbox %q in %s exists with another configuration: %s; a Config takes effect only when a sandbox is created: leave those fields unset to use the sandbox as it is, remove the sandbox to create it anew, or use another ID",
		e.ID, e.StateDir, strings.Join(diffs, ", "))
}

// Is reports whether target is ErrConfigMismatch or
// sandbox.ErrInvalidArgument.
func (e *ConfigMismatchError) Is(target error) bool {
	return target == ErrConfigMismatch || target == sandbox.ErrInvalidArgument
}

// showValue formats a Config value for an error message.
func showValue(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case time.Duration:
		return v.String()
	default:
		return fmt.Sprintf("%+v", v)
	}
}

// setFields returns the indexes of the fields of c that are set: not at
// their zero value, nor empty for maps and slices. Reflection covers every
// field of Config, so a new create-time setting needs no code here.
func setFields(c Config) []int {
	v := reflect.ValueOf(c)
	var set []int
	for i := range v.NumField() {
		f := v.Field(i)
		if f.IsZero() || (f.Kind() == reflect.Map || f.Kind() == reflect.Slice) && f.Len() == 0 {
			continue
		}
		if v.Type().Field(i).Name == "Secrets" {
			// Kept in the sandbox's folder, not its Config: they shape a
			// new sandbox; SetSecrets changes an existing one's.
			continue
		}
		set = append(set, i)
	}
	return set
}

// checkConfig compares the fields set of the Config a handle asked for
// (normalized: defaults filled, paths cleaned) with the Config its existing
// sandbox has; a field left unset means "what the sandbox has".
func checkConfig(id, stateDir string, set []int, asked, have Config) error {
	av, hv := reflect.ValueOf(asked), reflect.ValueOf(have)
	var diffs []FieldMismatch
	for _, i := range set {
		a, h := av.Field(i).Interface(), hv.Field(i).Interface()
		if !reflect.DeepEqual(a, h) {
			diffs = append(diffs, FieldMismatch{Field: av.Type().Field(i).Name, Sandbox: h, Requested: a})
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return &ConfigMismatchError{ID: id, StateDir: stateDir, Fields: diffs}
}
