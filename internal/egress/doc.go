// Package egress is the egress proxy of a sandbox whose network is a
// domain allow list: a host-side proxy that lets the sandbox reach the
// names on its list, and nothing else.
//
// A proxy serves any listeners (in production, TCP sockets listening on
// 127.0.0.1:3128 and [::1]:3128 in the sandbox's network namespace,
// accepted from outside it) three protocols, told apart by the first
// byte of a connection: plain HTTP forwarding
// (absolute-URI requests, "GET http://name/ HTTP/1.1"), HTTP CONNECT, and
// SOCKS5 CONNECT with domain names (what clients call socks5h: the proxy
// resolves the name).
//
// # Policy
//
// An [AllowList] holds names ("example.com") and wildcards
// ("*.example.com"). A name matches an entry equal to it; a wildcard
// matches every name below it, at any depth ("a.example.com",
// "a.b.example.com"), but not the name itself: "*.example.com" does not
// match "example.com", which needs an entry of its own. This is E2B's
// rule (its egress firewall matches "*.example.com" as the suffix
// ".example.com"), and the usual meaning of a wildcard certificate name.
// Matching ignores case and a trailing dot. Names are ASCII: an
// internationalized name is given, and requested, in its punycode form
// ("xn--…"), as every client sends it; a name with other characters is
// refused with an error saying so.
//
// The proxy resolves names itself, with its own [Resolver], so that what
// the sandbox believes a name resolves to does not matter, and it refuses:
//   - names not on the list;
//   - IP literals in any form ("10.0.0.1", "[::1]", "2130706433",
//     "0x7f.1"): only names are on a domain list;
//   - names that resolve only to addresses that are not public unicast
//     (loopback, private, link-local including 169.254.169.254, shared
//     100.64/10, ULA fc00::/7, multicast, reserved and documentation
//     ranges, and the addresses of this host), so that an allowed name
//     that resolves to an internal address (DNS rebinding) reaches
//     nothing; [Config.AllowNonPublic] turns this off, for tests whose
//     origin servers listen on loopback;
//   - a Host header that names another host than the absolute URI or the
//     CONNECT target, a CONNECT or absolute-URI request inside a tunnel
//     that names another host (a relayed CONNECT), and a TLS ClientHello
//     whose server name (SNI) is not the tunnel's: spoofed Host and SNI;
//   - cleartext HTTP/2 inside a tunnel, which cannot be checked.
//
// A refusal answers 403 with the reason as the body (HTTP, CONNECT, and
// HTTP requests inside a tunnel, with a Proxy-Status header), SOCKS5 reply
// 0x02 (not allowed by ruleset), or a TLS access_denied alert, and is
// recorded in a bounded policy log ([Proxy.Refusals]).
//
// What a domain list cannot stop: a client that does not use the proxy
// has no route at all (the sandbox has only loopback); an allowed host
// that is itself a proxy or a CDN serving other names over TLS (domain
// fronting with a matching SNI and another Host inside the encryption) is
// reached as allowed, since the proxy does not decrypt TLS. Inside a
// cleartext tunnel every request is checked (it is parsed and written
// anew, so that the destination reads what was checked); after a request
// that may switch protocols (an upgrade, a CONNECT) the next bytes are
// judged again: HTTP is still checked, TLS must name the tunnel's host,
// anything else (WebSocket frames) passes unread. A request line longer
// than the head buffer is refused rather than passed unread.
//
// # Interception
//
// With an [Interceptor] ([Config.Intercept], [Proxy.SetIntercept]: in
// production the substituting proxy of a sandbox's secrets), a CONNECT
// (HTTP or SOCKS5) to an allowed name that the interceptor Intercepts is
// answered as ever (200, SOCKS5 success), then the client connection
// goes to the interceptor's ServeTLS instead of a tunnel; its upstream
// connections go through [Proxy.Dial], which applies the same policy as
// a CONNECT. Absolute-URI requests are given to its Rewrite before they go
// upstream (the head only, unless it InterceptsHTTP the host), so that
// placeholders sent in cleartext are reported. IP literals and names not
// on the list are refused before the interceptor is asked. Without an
// interceptor nothing changes.
//
// # Resources
//
// Connections are limited ([Config.MaxConns]); a client has
// [Config.HandshakeTimeout] to say where it goes; a connection through
// which no byte moved for [Config.IdleTimeout] is closed (on Linux, read
// from the upstream socket's TCP counters, so that the bytes themselves
// move with splice(2) and never through the proxy's memory). Request and
// response heads are read into a bounded buffer; bodies stream.
package egress
