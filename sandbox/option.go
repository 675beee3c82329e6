package sandbox

import (
	"fmt"
	"strings"
)

// An Option names an option of a sandbox's spec the way the library
// spells it (a field of local.Options or local.Config, with the value
// meant when the field takes several). Errors about options name them as
// Options inside an [*OptionError], so that a front end with options of
// its own (the agentbox CLI and its flags) can name them its way.
type Option string

// The options errors name.
const (
	// OptionNetworkBlocked is the blocked network mode (loopback only).
	OptionNetworkBlocked Option = "Network.Mode blocked"
	// OptionNetworkDomains is an allow list of names reached through an
	// egress proxy.
	OptionNetworkDomains Option = "Network.Domains"
	// OptionNetworkAllow is an allow list of address ranges.
	OptionNetworkAllow Option = "Network.Allow"
	// OptionNetworkHost is the host's network namespace (no policy).
	OptionNetworkHost Option = "Network.Mode host"
	// OptionImage is the image a sandbox's root is made of.
	OptionImage Option = "Image"
	// OptionSnapshot is the snapshot a sandbox's root is made of.
	OptionSnapshot Option = "Snapshot"
	// OptionReadOnlyRoot is a root of the host's folders, read-only.
	OptionReadOnlyRoot Option = "ReadOnlyRoot"
	// OptionAllowFUSE lets a sandbox's commands mount FUSE file systems.
	OptionAllowFUSE Option = "Confinement.AllowFUSE"
	// OptionDiskMiB is the size of a sandbox's disk.
	OptionDiskMiB Option = "Resources.DiskMiB"
	// OptionDiskBudgetMB is the disk budget of a state dir's sandboxes.
	OptionDiskBudgetMB Option = "Options.DiskBudgetMB"
)

// OptionError is an error whose message names options. Its text is made
// of parts, plain text and Options; Error names the Options as the
// library spells them, Message as the caller's function does. It matches
// Err (a sentinel such as ErrIsolationUnavailable) and Cause with
// errors.Is. Build one with [NewOptionError].
type OptionError struct {
	// Err is the kind of error (matched by errors.Is); nil for none.
	// Error and Message start with its text.
	Err error
	// Parts are the message after Err's text: strings and Options.
	Parts []any
	// Cause is the error that caused this one, or nil; Error and
	// Message end with its text.
	Cause error
}

// NewOptionError returns the OptionError of kind err whose message is
// parts: each an Option, a string, or a value printed with fmt.Sprint.
func NewOptionError(err error, parts ...any) *OptionError {
	e := &OptionError{Err: err, Parts: make([]any, len(parts))}
	for i, p := range parts {
		switch p.(type) {
		case Option, string:
			e.Parts[i] = p
		default:
			e.Parts[i] = fmt.Sprint(p)
		}
	}
	return e
}

// WithCause returns e with cause as its Cause.
func (e *OptionError) WithCause(cause error) *OptionError {
	e.Cause = cause
	return e
}

// Error returns the message with the library's names of the options.
func (e *OptionError) Error() string { return e.Message(nil) }

// Message returns the message with each Option named by name(o); nil
// names them as the library does (string(o)).
func (e *OptionError) Message(name func(Option) string) string {
	var b strings.Builder
	if e.Err != nil {
		b.WriteString(e.Err.Error())
		b.WriteString(": ")
	}
	for _, p := range e.Parts {
		switch p := p.(type) {
		case Option:
			if name != nil {
				b.WriteString(name(p))
			} else {
				b.WriteString(string(p))
			}
		case string:
			b.WriteString(p)
		}
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Options returns the options the message names, in order.
func (e *OptionError) Options() []Option {
	var out []Option
	for _, p := range e.Parts {
		if o, ok := p.(Option); ok {
			out = append(out, o)
		}
	}
	return out
}

// Unwrap returns Err and Cause, those that are set.
func (e *OptionError) Unwrap() []error {
	var out []error
	if e.Err != nil {
		out = append(out, e.Err)
	}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}
