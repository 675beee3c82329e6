package secretproxy

import (
	"bytes"
	"container/list"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"
)

// CA file names in a state dir: the certificate (what sandboxes trust)
// and the private key with the certificate again (mode 0600).
const (
	CACertFile = "ca.pem"
	CAKeyFile  = "ca-key.pem"
)

// caValidity is how long a CA made by LoadOrCreateCA is valid.
const caValidity = 10 * 365 * 24 * time.Hour

// Leaf certificates: their validity, backdating (for clocks a little
// behind), and how many the cache keeps.
const (
	leafValidity = 7 * 24 * time.Hour
	leafBackdate = time.Hour
	leafRenew    = 24 * time.Hour // a cached leaf closer to its end is made anew
	leafCacheMax = 256
)

// caTemplate returns the template of a new root: ECDSA P-256, CA:TRUE
// with path length 0 (it signs leaves only), usable to sign certificates.
func caTemplate(now time.Time) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "agentbox secrets CA", Organization: []string{"agentbox"}},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
}

// newCAPEM makes a new root and returns its certificate and key, PEM.
func newCAPEM() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := caTemplate(time.Now())
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	return certPEM, keyPEM, nil
}

func randomSerial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

// CA is the certificate authority of a state dir whose certificates the
// sandboxes trust for their secrets' hosts. It mints a leaf certificate
// per host name on demand, cached. It is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte

	mu     sync.Mutex
	leaves map[string]*list.Element // of *leaf
	lru    list.List                // most recently used first
	flight singleflight.Group
}

type leaf struct {
	name string
	cert *tls.Certificate
}

// LoadOrCreateCA returns the CA kept in dir (ca.pem, and ca-key.pem mode
// 0600), making it the first time (atomically: racing callers get one).
//
// ca-key.pem holds the key and the certificate; it is made whole in a
// temporary file and hard-linked into place, so that of racing makers
// one wins and the others load its CA. ca.pem is then written from it
// (atomically, same content whoever writes it).
func LoadOrCreateCA(dir string) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secretproxy: make the CA's directory: %w", err)
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	b, err := readNoFollow(keyPath)
	if errors.Is(err, os.ErrNotExist) {
		b, err = makeCAFile(keyPath)
	}
	if err != nil {
		return nil, fmt.Errorf("secretproxy: load the CA %s: %w", keyPath, err)
	}
	ca, err := ParseCA(b, b)
	if err != nil {
		return nil, fmt.Errorf("secretproxy: load the CA %s (remove it and %s to make a new CA): %w", keyPath, CACertFile, err)
	}
	if err := writeCert(filepath.Join(dir, CACertFile), ca.certPEM); err != nil {
		return nil, fmt.Errorf("secretproxy: write the CA's certificate: %w", err)
	}
	return ca, nil
}

// readNoFollow reads path, refusing a symbolic link.
func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("mode %v: the CA key must be readable by its owner only (chmod 600)", st.Mode().Perm())
	}
	buf := new(bytes.Buffer)
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

// makeCAFile makes a new CA into path (key and certificate, mode 0600)
// unless another maker was first, and returns what path holds.
func makeCAFile(path string) ([]byte, error) {
	certPEM, keyPEM, err := newCAPEM()
	if err != nil {
		return nil, err
	}
	content := append(keyPEM, certPEM...)
	tmp, err := writeTemp(filepath.Dir(path), content, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	// A hard link fails if path exists: the first maker wins.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return readNoFollow(path)
		}
		return nil, err
	}
	return content, nil
}

// writeCert makes path hold certPEM, mode 0644, unless it already does.
func writeCert(path string, certPEM []byte) error {
	if b, err := os.ReadFile(path); err == nil && bytes.Equal(b, certPEM) {
		return nil
	}
	tmp, err := writeTemp(filepath.Dir(path), certPEM, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	return os.Rename(tmp, path)
}

// writeTemp writes data, synced, to a new temporary file in dir with
// mode perm and returns its path; on an error it leaves none.
func writeTemp(dir string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, ".ca-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// ParseCA returns the CA of a PEM certificate and PEM private key (PKCS
// #8 or SEC 1 ECDSA). Other PEM blocks in either are skipped, so that
// both may be one file holding the two.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	certBlock := findPEM(certPEM, "CERTIFICATE")
	if certBlock == nil {
		return nil, errors.New("secretproxy: no CERTIFICATE block in the CA's certificate")
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("secretproxy: the CA's certificate: %w", err)
	}
	key, keyBlock, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("secretproxy: the CA's key does not match its certificate")
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("secretproxy: the CA's certificate is not a CA certificate that signs certificates")
	}
	return &CA{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(certBlock),
		keyPEM:  pem.EncodeToMemory(keyBlock),
		leaves:  map[string]*list.Element{},
	}, nil
}

func findPEM(b []byte, typ string) *pem.Block {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil || blk.Type == typ {
			return blk
		}
	}
}

func parseKey(keyPEM []byte) (*ecdsa.PrivateKey, *pem.Block, error) {
	if blk := findPEM(keyPEM, "PRIVATE KEY"); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("secretproxy: the CA's key: %w", err)
		}
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, nil, errors.New("secretproxy: the CA's key is not an ECDSA key")
		}
		return ek, blk, nil
	}
	if blk := findPEM(keyPEM, "EC PRIVATE KEY"); blk != nil {
		k, err := x509.ParseECPrivateKey(blk.Bytes)
		if err != nil {
			return nil, nil, fmt.Errorf("secretproxy: the CA's key: %w", err)
		}
		return k, blk, nil
	}
	return nil, nil, errors.New("secretproxy: no PRIVATE KEY block in the CA's key")
}

// CertPEM returns the CA's certificate, PEM: what sandboxes trust.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// KeyPEM returns the CA's private key, PEM (PKCS #8). For handing the CA
// to a proxy process (by descriptor); it must never enter a sandbox.
func (ca *CA) KeyPEM() []byte { return bytes.Clone(ca.keyPEM) }

// Certificate returns a certificate for the host name name (canonical:
// lower case, no trailing dot) signed by the CA: its only name is name.
// Certificates are cached; concurrent callers for one name share one
// signing.
func (ca *CA) Certificate(name string) (*tls.Certificate, error) {
	if c := ca.cached(name, time.Now()); c != nil {
		return c, nil
	}
	v, err, _ := ca.flight.Do(name, func() (any, error) {
		if c := ca.cached(name, time.Now()); c != nil {
			return c, nil
		}
		c, err := ca.mint(name, time.Now())
		if err != nil {
			return nil, err
		}
		ca.store(name, c)
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*tls.Certificate), nil
}

func (ca *CA) cached(name string, now time.Time) *tls.Certificate {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	e, ok := ca.leaves[name]
	if !ok {
		return nil
	}
	l := e.Value.(*leaf)
	if now.Add(leafRenew).After(l.cert.Leaf.NotAfter) {
		ca.lru.Remove(e)
		delete(ca.leaves, name)
		return nil
	}
	ca.lru.MoveToFront(e)
	return l.cert
}

func (ca *CA) store(name string, c *tls.Certificate) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if e, ok := ca.leaves[name]; ok {
		ca.lru.Remove(e)
	}
	ca.leaves[name] = ca.lru.PushFront(&leaf{name: name, cert: c})
	for ca.lru.Len() > leafCacheMax {
		old := ca.lru.Back()
		ca.lru.Remove(old)
		delete(ca.leaves, old.Value.(*leaf).name)
	}
}

// mint signs a new leaf certificate for name.
func (ca *CA) mint(name string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafValidity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-leafBackdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("secretproxy: sign a certificate for %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: cert}, nil
}
