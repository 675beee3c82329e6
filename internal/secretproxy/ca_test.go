package secretproxy

import (
	"bytes"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"
)

func TestNewPlaceholderForm(t *testing.T) {
	re := regexp.MustCompile("^" + PlaceholderPrefix + "[a-z0-9]{32}$")
	seen := map[string]bool{}
	for range 1000 {
		p := NewPlaceholder()
		if !re.MatchString(p) || seen[p] {
			t.Fatalf("placeholder %q: not of the form or repeated", p)
		}
		seen[p] = true
	}
}

func TestCAFileModes(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateCA(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{CACertFile: 0o644, CAKeyFile: 0o600} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", name, st.Mode().Perm(), want)
		}
	}
}

func TestCALoadedAgain(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.CertPEM(), b.CertPEM()) || !bytes.Equal(a.KeyPEM(), b.KeyPEM()) {
		t.Fatal("loading the CA again gave another CA")
	}
	if onDisk, _ := os.ReadFile(filepath.Join(dir, CACertFile)); !bytes.Equal(onDisk, a.CertPEM()) {
		t.Fatal("ca.pem is not the CA's certificate")
	}
}

func TestCARacingCreatorsGetOneCA(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	certs := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ca, err := LoadOrCreateCA(dir)
			if err != nil {
				t.Error(err)
				return
			}
			certs[i] = ca.CertPEM()
		})
	}
	wg.Wait()
	for i := range certs {
		if !bytes.Equal(certs[i], certs[0]) {
			t.Fatal("racing LoadOrCreateCA calls got different CAs")
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("the CA dir holds %d files, want ca.pem and ca-key.pem only", len(entries))
	}
}

func TestCAKeyReadableByOthersRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateCA(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, CAKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Fatal("a CA key readable by others was loaded")
	}
}

func TestCAKeySymlinkRefused(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	if _, err := LoadOrCreateCA(other); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, CAKeyFile), filepath.Join(dir, CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil {
		t.Fatal("a CA key behind a symbolic link was loaded")
	}
}

func TestCARootIsConstrained(t *testing.T) {
	ca := newTestCA(t)
	c := ca.cert
	if !c.IsCA || c.MaxPathLen != 0 || !c.MaxPathLenZero || c.KeyUsage&x509.KeyUsageCertSign == 0 || c.Subject.CommonName != "agentbox secrets CA" {
		t.Fatalf("root %+v: want CA:TRUE, pathlen 0, CertSign", c.Subject)
	}
	if time.Until(c.NotAfter) < 9*365*24*time.Hour {
		t.Fatalf("root valid until %v, want about 10 years", c.NotAfter)
	}
}

func TestLeafChainsToCAAndNamesHostOnly(t *testing.T) {
	ca := newTestCA(t)
	cert, err := ca.Certificate("api.test")
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "api.test" || len(leaf.IPAddresses) != 0 || leaf.IsCA {
		t.Fatalf("leaf names %v %v (CA %t), want api.test only", leaf.DNSNames, leaf.IPAddresses, leaf.IsCA)
	}
	opts := x509.VerifyOptions{Roots: ca.pool(), DNSName: "api.test"}
	if _, err := leaf.Verify(opts); err != nil {
		t.Fatalf("leaf does not chain to CertPEM: %v", err)
	}
	opts.DNSName = "other.api.test"
	if _, err := leaf.Verify(opts); err == nil {
		t.Fatal("the leaf for api.test is valid for another name")
	}
}

func TestLeafCachedAndShared(t *testing.T) {
	ca := newTestCA(t)
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Go(func() {
			c, err := ca.Certificate("api.test")
			if err == nil {
				got[i] = c.Certificate[0]
			}
		})
	}
	wg.Wait()
	for _, g := range got {
		if !bytes.Equal(g, got[0]) || g == nil {
			t.Fatal("concurrent callers for one name got different certificates")
		}
	}
}

func TestLeafCacheBounded(t *testing.T) {
	ca := newTestCA(t)
	for i := range leafCacheMax + 10 {
		if _, err := ca.Certificate("h" + itoa(i) + ".test"); err != nil {
			t.Fatal(err)
		}
	}
	if n := ca.lru.Len(); n != leafCacheMax || len(ca.leaves) != leafCacheMax {
		t.Fatalf("cache holds %d leaves, want %d", n, leafCacheMax)
	}
}

func TestCARacingProcessesGetOneCA(t *testing.T) {
	dir := t.TempDir()
	const n = 6
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^$")
		cmds[i].Env = append(os.Environ(), "SECRETPROXY_TEST_MAKE_CA="+dir)
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout = outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	for i := range outs {
		if outs[i].Len() == 0 || !bytes.Equal(outs[i].Bytes(), outs[0].Bytes()) {
			t.Fatal("racing processes got different CAs")
		}
	}
}
