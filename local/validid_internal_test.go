package local

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestValidIDUserMatchPatterns: validID and validUser accept exactly what
// the regular expressions they replace accept, on hand-picked and random
// strings.
func TestValidIDUserMatchPatterns(t *testing.T) {
	idRE := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	userRE := regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	cases := []string{"", "a", "A", "0", "_", "-", ".", "a.b", "a_b-c", "_x", "x_", "ab/c", "a b", "é", "a\n",
		strings.Repeat("a", 32), strings.Repeat("a", 33), strings.Repeat("a", 64), strings.Repeat("a", 65), "Agent", "agent9"}
	const alphabet = "aZ09._-/ \x00é"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(70))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := validID(s), idRE.MatchString(s); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := validUser(s), userRE.MatchString(s); got != want {
			t.Errorf("validUser(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
