package tools

import (
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"
)

// headShare is the part of a bounded text given to its head; the tail,
// where errors and results usually are, gets the rest.
const headShare = 4

// bound returns s cut to about max bytes: its head and its tail around a
// marker that gives the byte counts and how to read the rest (more, a
// hint naming the handle). Cuts fall on line breaks near the cut points
// when there are some, and never inside a UTF-8 sequence.
func bound(s string, max int, more func(headEnd int) string) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	head := cutBack(s, max/headShare)
	tailStart := cutForward(s, len(s)-(max-max/headShare))
	marker := fmt.Sprintf("\n[… %d bytes omitted: the output has %d bytes; shown are the first %d and the last %d. %s …]\n",
		tailStart-head, len(s), head, len(s)-tailStart, more(head))
	return s[:head] + marker + s[tailStart:], true
}

// cutBack returns an index ≤ i at a line start or a rune start of s.
func cutBack(s string, i int) int {
	for j := i; j > i-i/4 && j > 0; j-- {
		if s[j-1] == '\n' {
			return j
		}
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// cutForward returns an index ≥ i at a line start or a rune start of s.
func cutForward(s string, i int) int {
	limit := i + (len(s)-i)/4
	for j := i; j < limit; j++ {
		if j > 0 && s[j-1] == '\n' {
			return j
		}
	}
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// storedOutput is a command's whole output, kept for read_output.
type storedOutput struct {
	command        string
	stdout, stderr string
	// dropped counts the bytes of each stream dropped before it was kept
	// (MaxRetainedBytes).
	droppedOut, droppedErr int64
}

// outputStore keeps the last max outputs by handle.
type outputStore struct {
	max   int
	mu    sync.Mutex
	next  int
	order []string
	byID  map[string]*storedOutput
}

// put stores o and returns its handle, forgetting the oldest outputs
// beyond max.
func (st *outputStore) put(o *storedOutput) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID == nil {
		st.byID = map[string]*storedOutput{}
	}
	st.next++
	h := "out-" + strconv.Itoa(st.next)
	st.byID[h] = o
	st.order = append(st.order, h)
	for len(st.order) > st.max {
		delete(st.byID, st.order[0])
		st.order = st.order[1:]
	}
	return h
}

func (st *outputStore) get(h string) (*storedOutput, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	o, ok := st.byID[h]
	return o, ok
}
