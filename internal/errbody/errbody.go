// Package errbody reads the body of an HTTP error answer for an error
// value: a bounded part of it, and its text cut on a rune boundary when it
// is too long to show in a message.
package errbody

import (
	"fmt"
	"io"

	"github.com/agentbox-dev/agentbox/internal/utf8cut"
)

// Max is how much of an error answer's body Read keeps, in bytes.
const Max = 64 << 10

// Read returns at most Max bytes of body, the body of an error answer. A
// read error ends what it returns: the answer is an error already, and its
// body only words it.
func Read(body io.Reader) []byte {
	b, _ := io.ReadAll(io.LimitReader(body, Max))
	return b
}

// Cut returns s when it holds at most n bytes; otherwise its first n bytes
// or fewer, ending on a rune boundary, followed by "… (N bytes more)".
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := utf8cut.Before(s, n)
	return fmt.Sprintf("%s… (%d bytes more)", s[:cut], len(s)-cut)
}
