package secretproxy

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// scrubber replaces secrets' values by their placeholders in a
// response from a host the secrets allow, so that a host that echoes a
// request (its headers, a stored body) does not hand the value back to
// the sandbox.
type scrubber struct {
	pairs []scrubPair // longest value first
	keep  int         // the longest value's length less one
}

// scrubPair is a value and what replaces it: its placeholder, or, where
// the length must not change, mask (the placeholder cut or padded with
// '_' to the value's length).
type scrubPair struct{ value, placeholder, mask []byte }

// maskFor returns placeholder cut or padded with '_' to n bytes.
func maskFor(placeholder string, n int) []byte {
	if n <= len(placeholder) {
		return []byte(placeholder[:n])
	}
	return []byte(placeholder + strings.Repeat("_", n-len(placeholder)))
}

// bufferedScrubMax is the largest response body of known length that is
// read whole and scrubbed with placeholders (its Content-Length set
// anew); longer ones stream, masked.
const bufferedScrubMax = 64 << 10

// newScrubber returns the scrubber of the values that may go to info's
// host, or nil when there is none.
func newScrubber(t *table, info connInfo) *scrubber {
	var sc scrubber
	for i := range t.secrets {
		s := &t.secrets[i]
		if s.allows(info.host, info.tls) {
			sc.pairs = append(sc.pairs, scrubPair{[]byte(s.Value), []byte(s.Placeholder), maskFor(s.Placeholder, len(s.Value))})
			sc.keep = max(sc.keep, len(s.Value)-1)
		}
	}
	if len(sc.pairs) == 0 {
		return nil
	}
	slices.SortFunc(sc.pairs, func(a, b scrubPair) int { return len(b.value) - len(a.value) })
	return &sc
}

// replace returns b with every value replaced (b itself when it holds
// none).
func (sc *scrubber) replace(b []byte) []byte {
	for _, p := range sc.pairs {
		if bytes.Contains(b, p.value) {
			b = bytes.ReplaceAll(b, p.value, p.placeholder)
		}
	}
	return b
}

// scrubResponse scrubs resp's headers, and its body unless it is
// compressed (Content-Encoding other than identity: not scrubbed). A
// body of known length up to 64 KiB is read whole, its values replaced by
// their placeholders and its Content-Length set anew; a longer one
// streams, each value replaced by its mask (of the value's length, so
// that the Content-Length holds); a body of unknown length streams with
// placeholders. Streams go through a window of the longest value's
// length.
func (p *Proxy) scrubResponse(resp *http.Response) error {
	info, _ := resp.Request.Context().Value(infoKey{}).(connInfo)
	sc := newScrubber(p.table.Load(), info)
	if sc == nil {
		return nil
	}
	for _, vs := range resp.Header {
		for i, v := range vs {
			vs[i] = string(sc.replace([]byte(v)))
		}
	}
	switch {
	case resp.StatusCode < 200, resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusNotModified,
		resp.Request.Method == http.MethodHead, resp.Body == nil, resp.Body == http.NoBody:
		return nil
	}
	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil
	}
	if resp.ContentLength >= 0 && resp.ContentLength <= bufferedScrubMax {
		body := make([]byte, resp.ContentLength)
		_, err := io.ReadFull(resp.Body, body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		body = sc.replace(body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	resp.Body = &scrubReader{sc: sc, src: resp.Body, tmp: copyBufs.Get(), mask: resp.ContentLength >= 0}
	return nil
}

// scrubReader scrubs a body as it streams: it holds back the last
// sc.keep bytes read, which may start a value whose end has not come.
// Bytes without a value are returned from its buffer as they are.
type scrubReader struct {
	sc   *scrubber
	src  io.ReadCloser
	tmp  []byte // the buffer: out, then the held-back bytes, then free space
	n    int    // the bytes in tmp
	from int    // where the held-back bytes start in tmp
	out  []byte // scrubbed, not yet returned (in tmp, or rep)
	rep  []byte // output with replacements
	err  error
	mask bool // replace by masks, keeping the length
}

func (r *scrubReader) Read(b []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		// Move the held-back bytes to the front, then read after them.
		r.n = copy(r.tmp, r.tmp[r.from:r.n])
		r.from = 0
		if r.n == len(r.tmp) { // a value longer than the buffer: grow it
			r.tmp = append(r.tmp, make([]byte, len(r.tmp))...)
		}
		m, err := r.src.Read(r.tmp[r.n:])
		r.n += m
		if err != nil {
			r.err = err
		}
		r.process(err != nil)
	}
	n := copy(b, r.out)
	r.out = r.out[n:]
	return n, nil
}

// process makes out what of tmp can no longer start a value cut at its
// end, scrubbed (everything when final).
func (r *scrubReader) process(final bool) {
	data := r.tmp[:r.n]
	safe := len(data) - r.sc.keep
	if final {
		safe = len(data)
	}
	at, p := r.next(data)
	if at < 0 || at >= safe {
		safe = max(safe, 0)
		r.out, r.from = data[:safe], safe
		return
	}
	out := r.rep[:0]
	i := 0
	for at >= 0 && i+at < safe {
		out = append(out, data[i:i+at]...)
		if r.mask {
			out = append(out, p.mask...)
		} else {
			out = append(out, p.placeholder...)
		}
		i += at + len(p.value)
		at, p = r.next(data[i:])
	}
	end := max(i, safe)
	out = append(out, data[i:end]...)
	r.out, r.rep, r.from = out, out, end
}

// next returns where the first value in b starts, and its pair, or -1.
func (r *scrubReader) next(b []byte) (int, *scrubPair) {
	at, which := -1, (*scrubPair)(nil)
	for k := range r.sc.pairs {
		p := &r.sc.pairs[k]
		if j := bytes.Index(b, p.value); j >= 0 && (at < 0 || j < at) {
			at, which = j, p
		}
	}
	return at, which
}

func (r *scrubReader) Close() error {
	if r.tmp != nil {
		copyBufs.Put(r.tmp)
		r.tmp = nil
		r.err = io.ErrClosedPipe
	}
	return r.src.Close()
}

// bufPool is a pool of copy buffers, for httputil.ReverseProxy and the
// scrubbers.
type bufPool struct{ p sync.Pool }

// copyBufs holds the proxy's copy buffers.
var copyBufs bufPool

func (b *bufPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufPool) Put(buf []byte) { b.p.Put(&buf) }
