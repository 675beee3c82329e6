// Package utf8cut says where UTF-8 text cut at any byte may be cut
// without splitting a character: for messages trimmed to a size and for
// streams sent in pieces as their bytes arrive.
package utf8cut

import "unicode/utf8"

// Before returns the largest index i <= n of s (0 <= i <= len(s)) at
// which s may be cut without splitting a UTF-8 sequence: s[:i] ends on a
// character boundary.
func Before(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	i := max(n, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// Complete returns the length of the longest prefix of b that does not
// end inside a UTF-8 sequence: len(b), unless b ends with the first bytes
// of a character that the bytes to come may complete. Invalid bytes,
// which nothing completes, count as complete.
func Complete(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
