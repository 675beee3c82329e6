package secretproxy

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// scrubber replaces secrets' values by their placeholders in a
// response from a host the secrets allow, so that a host that echoes a
// request (its headers, a stored body) does not hand the value back to
// the sandbox.
type scrubber struct {
	pairs []scrubPair // longest value first
	keep  int         // the longest value's length less one
}

type scrubPair struct{ value, placeholder []byte }

// newScrubber returns the scrubber of the values that may go to info's
// host, or nil when there is none.
func newScrubber(t *table, info connInfo) *scrubber {
	var sc scrubber
	for i := range t.secrets {
		s := &t.secrets[i]
		if s.allows(info.host, info.tls) {
			sc.pairs = append(sc.pairs, scrubPair{[]byte(s.Value), []byte(s.Placeholder)})
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
// body of known length up to MaxBody is read whole and its
// Content-Length set anew; others stream through a window of the
// longest value's length, and a Content-Length is dropped (the client
// gets the body chunked), since scrubbing may change the length.
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
	if resp.ContentLength >= 0 && resp.ContentLength <= p.cfg.MaxBody {
		body, err := io.ReadAll(io.LimitReader(resp.Body, resp.ContentLength))
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
	resp.Body = &scrubReader{sc: sc, src: resp.Body, tmp: make([]byte, 32<<10)}
	if resp.ContentLength >= 0 {
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	return nil
}

// scrubReader scrubs a body as it streams: it holds back the last
// sc.keep bytes read, which may start a value whose end has not come.
type scrubReader struct {
	sc  *scrubber
	src io.ReadCloser
	tmp []byte
	buf []byte // read, not yet scanned to its end
	out []byte // scrubbed, not yet returned
	err error
}

func (r *scrubReader) Read(b []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		n, err := r.src.Read(r.tmp)
		r.buf = append(r.buf, r.tmp[:n]...)
		if err != nil {
			r.err = err
		}
		r.process(err != nil)
	}
	n := copy(b, r.out)
	r.out = r.out[n:]
	return n, nil
}

// process moves what of buf can no longer start a value cut at its end
// to out, scrubbed (everything when final).
func (r *scrubReader) process(final bool) {
	data := r.buf
	safe := len(data) - r.sc.keep
	if final {
		safe = len(data)
	}
	out := r.out[:0]
	i := 0
	for {
		at, p := r.next(data[i:])
		if at < 0 || i+at >= safe {
			break
		}
		out = append(out, data[i:i+at]...)
		out = append(out, p.placeholder...)
		i += at + len(p.value)
	}
	end := max(i, safe)
	out = append(out, data[i:end]...)
	r.out = out
	r.buf = append(r.buf[:0], data[end:]...)
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

func (r *scrubReader) Close() error { return r.src.Close() }
