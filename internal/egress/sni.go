package egress

// serverName returns the server name (SNI, RFC 6066) of the TLS
// ClientHello at the start of b, the body of the client's first handshake
// record, or "" when b holds none (another message, no such extension,
// or too little of the message).
func serverName(b []byte) string {
	r := reader(b)
	if t, ok := r.byte(); !ok || t != 1 { // client_hello
		return ""
	}
	if !r.skip(3 + 2 + 32) { // length, legacy_version, random
		return ""
	}
	_, ok1 := r.vector(1) // legacy_session_id
	_, ok2 := r.vector(2) // cipher_suites
	_, ok3 := r.vector(1) // legacy_compression_methods
	exts, ok4 := r.vector(2)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return ""
	}
	for len(exts) > 0 {
		typ, ok := exts.uint16()
		data, ok2 := exts.vector(2)
		if !ok || !ok2 {
			return ""
		}
		if typ != 0 { // server_name
			continue
		}
		list, ok := data.vector(2)
		for ok && len(list) > 0 {
			kind, ok1 := list.byte()
			name, ok2 := list.vector(2)
			if !ok1 || !ok2 {
				return ""
			}
			if kind == 0 { // host_name
				return string(name)
			}
		}
		return ""
	}
	return ""
}

// reader reads the big-endian fields of a TLS message.
type reader []byte

func (r *reader) byte() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	b := (*r)[0]
	*r = (*r)[1:]
	return b, true
}

func (r *reader) uint16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := uint16((*r)[0])<<8 | uint16((*r)[1])
	*r = (*r)[2:]
	return v, true
}

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

// vector reads a vector whose length takes lenBytes (1 or 2) bytes.
func (r *reader) vector(lenBytes int) (reader, bool) {
	var n int
	switch lenBytes {
	case 1:
		b, ok := r.byte()
		if !ok {
			return nil, false
		}
		n = int(b)
	default:
		v, ok := r.uint16()
		if !ok {
			return nil, false
		}
		n = int(v)
	}
	if len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}
