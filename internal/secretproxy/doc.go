// Package secretproxy swaps a sandbox's secret placeholders for their
// values in the requests that leave the sandbox for the hosts each secret
// allows, and nowhere else.
//
// A sandbox's environment holds, for each of its secrets, an opaque
// placeholder (NewPlaceholder). A [Proxy] sees the sandbox's outbound
// connections to the secrets' hosts (handed to it by the egress proxy of
// a domain allow list, for CONNECT and absolute-URI requests, or by a
// firewall redirect, [Proxy.ServeTransparent]); for TLS it terminates the
// connection with a certificate for the host signed by the state dir's
// [CA] (which the sandbox trusts; its key never enters a sandbox),
// replaces placeholders, and forwards the request over TLS to the real
// host, whose certificate it verifies against the host's trust store
// (Config.RootCAs). An upstream whose certificate does not verify gets
// nothing: the client is answered 502.
//
// # What is replaced, where
//
// For a request to host over TLS, the placeholders of the secrets that
// allow host (sandbox.Secret's host patterns) are replaced by their
// values in:
//   - the URL's path and query (the value percent-escaped as each needs);
//   - every header value, as it is, and inside "Authorization: Basic"
//     (its base64 user:password decoded, replaced, encoded again);
//   - the body, when its length is known and at most Config.MaxBody, or
//     it is chunked and ends within MaxBody: it is read whole, replaced,
//     and sent with its new Content-Length. A longer body streams
//     unchanged (for a chunked one, an Event says so when its first
//     MaxBody bytes hold a placeholder). Trailers are not rewritten.
//
// Over cleartext HTTP ([Proxy.ServeHTTP], absolute-URI requests of the
// egress proxy) only the secrets with AllowHTTP are replaced. Any other
// placeholder (a secret that does not allow the host, or TLS-only over
// cleartext) goes out unchanged and is reported as an [Event] naming the
// secret. Events never hold a value or a placeholder (one a client put
// in a Host header or server name is quoted as "[the placeholder of
// NAME]"), nor do the proxy's 502 answers hold a value. A placeholder is
// replaced only whole, within one header value, the URL, or the body: one
// split across two headers, or between a header and the body, stays as it
// is.
//
// Responses are scrubbed (defence in depth, for hosts that echo what they
// get): each value of a secret that allows the host is replaced back in
// the response headers and in identity-encoded bodies, by its placeholder
// (headers; bodies up to 64 KiB, and chunked ones) or, in a streamed body
// of known length over 64 KiB, by a mask of the value's length (the
// placeholder cut or padded with '_', so that the Content-Length holds).
// Compressed bodies (a Content-Encoding other than identity) are not
// scrubbed, nor is a value the host hands back transformed (encoded,
// reversed): a host a secret allows is trusted with its value.
//
// # Requests the proxy refuses
//
// Requests are read by net/http's server, strictly: two differing
// Content-Lengths are refused (400); with Transfer-Encoding and
// Content-Length both, the chunked framing wins and the Content-Length is
// dropped (RFC 9112 §6.3), and the request is written upstream anew with
// the one framing the proxy read, so that the upstream cannot read a
// different request (request smuggling); bytes after a body are the next
// request, checked as any other. Each request's Host (and an absolute
// URI's host) must name the connection's host, or it is answered 421 and
// reported. On a TLS connection the ClientHello's server name (SNI) must
// be the connection's host too (the CONNECT target, or the SNI the
// transparent path routed by), or the handshake fails and is reported.
// Redirects are not followed: a 30x goes back to the client as it came,
// and a client that follows it to another host sends the placeholder
// there. Upgrades (101, WebSocket) are relayed both ways unchanged after
// their handshake, whose request is rewritten as any other.
//
// # Limits
//
// The proxy speaks HTTP/1.1 only, both ways (ALPN offers http/1.1, never
// h2): HTTP/2 clients fall back to HTTP/1.1. Upstream connections are
// kept alive and reused. [Proxy.ServeTransparent] peeks at most a TLS
// record (16 KiB) or a request head of that size, waiting at most 5 s; a
// client that sends nothing for 300 ms is taken for a server-first
// protocol (SMTP, SSH) and relayed unchanged, as is anything that is
// neither a ClientHello for an intercepted name nor a cleartext request
// for a host served over HTTP.
//
// # The CA
//
// [LoadOrCreateCA] keeps an ECDSA P-256 root ("agentbox secrets CA",
// valid 10 years, CA:TRUE, path length 0, no name constraints since the
// secrets' hosts change) in a state dir: ca.pem (0644, what sandboxes
// trust) and ca-key.pem (0600, the key and the certificate, read without
// following symbolic links, refused when others may read it). Leaf
// certificates are minted on demand, one per host name (that name only,
// ECDSA P-256, valid 7 days from an hour back), cached (the 256 most
// recently used) and signed once per name under concurrency. The key
// never enters a sandbox. A stolen key lets its holder impersonate any
// HTTPS host to every sandbox of that state dir (which trust the CA), and
// so read what those sandboxes send, values included for hosts whose
// traffic the holder can intercept; hosts and users that do not trust
// the CA are not affected. Remove both files to make a new CA (the
// sandboxes must then be given the new certificate).
package secretproxy
