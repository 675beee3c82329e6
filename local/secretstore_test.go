package local_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// storeValue is the value the store tests keep: a string no other byte
// sequence of the files contains by chance.
const storeValue = "sk-store-test-4f1d9c2a7b"

// newSecretStore opens a store in a new state dir and returns it with the
// state dir.
func newSecretStore(t *testing.T) (*local.SecretStore, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	st, err := local.OpenSecretStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st, dir
}

func createSecret(t *testing.T, st *local.SecretStore, name string, hosts ...string) local.StoredSecret {
	t.Helper()
	got, err := st.Create(sandbox.Secret{Name: name, Value: storeValue, Hosts: hosts}, "a note")
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return got
}

// TestSecretStoreRoundTrip: a created secret resolves, under the variable
// asked for, to its value and canonical hosts, from a store opened again.
func TestSecretStoreRoundTrip(t *testing.T) {
	st, dir := newSecretStore(t)
	createSecret(t, st, "API_KEY", "API.example.com.", "*.example.org")
	again, err := local.OpenSecretStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := again.Resolve(map[string]string{"OPENAI_KEY": "API_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "OPENAI_KEY" || got[0].Value != storeValue || !slices.Equal(got[0].Hosts, []string{"api.example.com", "*.example.org"}) {
		t.Fatalf("resolved %v (value right: %t)", got, len(got) == 1 && got[0].Value == storeValue)
	}
}

// TestSecretStoreListHasNoValue: List describes the secrets, name, hosts,
// description and times, and nothing of their values.
func TestSecretStoreListHasNoValue(t *testing.T) {
	st, _ := newSecretStore(t)
	createSecret(t, st, "B_KEY", "b.example.com")
	createSecret(t, st, "A_KEY", "a.example.com")
	list, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "A_KEY" || list[1].Name != "B_KEY" || list[0].Description != "a note" || list[0].Created.IsZero() || list[0].Updated.IsZero() {
		t.Fatalf("list %+v", list)
	}
	if s := fmt.Sprintf("%v %+v %#v", list, list, list); strings.Contains(s, storeValue) {
		t.Fatalf("the list formats with the value: %s", s)
	}
}

// TestSecretStoreFileHasNoValue: no file of the store holds the value in
// clear.
func TestSecretStoreFileHasNoValue(t *testing.T) {
	st, dir := newSecretStore(t)
	createSecret(t, st, "API_KEY", "api.example.com")
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(data), storeValue) {
			t.Errorf("%s holds the value in clear", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSecretStoreFileModes: the store's folder is 0700, its records and
// key 0600.
func TestSecretStoreFileModes(t *testing.T) {
	st, dir := newSecretStore(t)
	createSecret(t, st, "API_KEY", "api.example.com")
	for path, want := range map[string]os.FileMode{
		"secrets": 0o700, "secrets/store.json": 0o600, "secrets/key": 0o600,
	} {
		fi, err := os.Lstat(filepath.Join(dir, path))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, want)
		}
	}
}

// TestSecretStoreConcurrentCreators: stores of one state dir creating at
// once (as concurrent agentbox processes do) all keep their secrets, and
// of two creators of one name exactly one wins.
func TestSecretStoreConcurrentCreators(t *testing.T) {
	_, dir := newSecretStore(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range n {
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := local.OpenSecretStore(dir)
				if err == nil {
					_, err = st.Create(sandbox.Secret{Name: fmt.Sprintf("KEY_%d", i), Value: storeValue, Hosts: []string{"x.example.com"}}, "")
				}
				errs[2*i+j] = err
			}()
		}
	}
	wg.Wait()
	for i := range n {
		a, b := errs[2*i], errs[2*i+1]
		if (a == nil) == (b == nil) || !errors.Is(errors.Join(a, b), local.ErrSecretExists) {
			t.Errorf("KEY_%d: %v and %v, want one success and one ErrSecretExists", i, a, b)
		}
	}
	st, _ := local.OpenSecretStore(dir)
	if list, err := st.List(); err != nil || len(list) != n {
		t.Fatalf("%d secrets kept, want %d: %v", len(list), n, err)
	}
}

// TestSecretStoreBadInputStoresNothing: an invalid name, an empty or too
// long value, no hosts or a host that is no host pattern fail with
// sandbox.ErrInvalidSecret, without the value in the error, and store
// nothing.
func TestSecretStoreBadInputStoresNothing(t *testing.T) {
	st, _ := newSecretStore(t)
	for what, s := range map[string]sandbox.Secret{
		"name":       {Name: "1BAD-NAME", Value: storeValue, Hosts: []string{"a.example.com"}},
		"empty":      {Name: "K", Hosts: []string{"a.example.com"}},
		"too long":   {Name: "K", Value: storeValue + strings.Repeat("x", sandbox.MaxSecretValue), Hosts: []string{"a.example.com"}},
		"no hosts":   {Name: "K", Value: storeValue},
		"URL host":   {Name: "K", Value: storeValue, Hosts: []string{"https://a.example.com/"}},
		"IP host":    {Name: "K", Value: storeValue, Hosts: []string{"10.0.0.1"}},
		"line break": {Name: "K", Value: storeValue + "\n", Hosts: []string{"a.example.com"}},
	} {
		_, err := st.Create(s, "")
		if !errors.Is(err, sandbox.ErrInvalidSecret) || strings.Contains(err.Error(), storeValue) {
			t.Errorf("%s: %v, want ErrInvalidSecret without the value", what, err)
		}
	}
	if list, err := st.List(); err != nil || len(list) != 0 {
		t.Fatalf("stored %v, %v", list, err)
	}
}

// TestSecretStoreUpdateBadInputChangesNothing: an update to hosts that
// are no host patterns, or to an empty value, fails and leaves the secret
// as it was.
func TestSecretStoreUpdateBadInputChangesNothing(t *testing.T) {
	st, _ := newSecretStore(t)
	before := createSecret(t, st, "API_KEY", "api.example.com")
	empty := ""
	if _, err := st.Update("API_KEY", nil, []string{"api.example.com:443"}); !errors.Is(err, sandbox.ErrInvalidSecret) {
		t.Errorf("bad host: %v", err)
	}
	if _, err := st.Update("API_KEY", &empty, nil); !errors.Is(err, sandbox.ErrInvalidSecret) {
		t.Errorf("empty value: %v", err)
	}
	got, err := st.Resolve(map[string]string{"API_KEY": "API_KEY"})
	if err != nil || got[0].Value != storeValue || !slices.Equal(got[0].Hosts, before.Hosts) {
		t.Fatalf("after bad updates: %v, %v", got, err)
	}
}

// TestSecretStoreUpdate: an update changes what it is given (value,
// hosts) and keeps the rest.
func TestSecretStoreUpdate(t *testing.T) {
	st, _ := newSecretStore(t)
	createSecret(t, st, "API_KEY", "api.example.com")
	v := storeValue + "-2"
	if _, err := st.Update("API_KEY", &v, nil); err != nil {
		t.Fatal(err)
	}
	got, err := st.Update("API_KEY", nil, []string{"other.example.com"})
	if err != nil || !slices.Equal(got.Hosts, []string{"other.example.com"}) || got.Description != "a note" {
		t.Fatalf("update hosts: %+v, %v", got, err)
	}
	res, err := st.Resolve(map[string]string{"K": "API_KEY"})
	if err != nil || res[0].Value != v {
		t.Fatalf("value after update: right %t, %v", err == nil && res[0].Value == v, err)
	}
}

// TestSecretStoreDelete: a deleted secret is gone; deleting or updating
// an unknown one matches sandbox.ErrNotFound.
func TestSecretStoreDelete(t *testing.T) {
	st, _ := newSecretStore(t)
	createSecret(t, st, "API_KEY", "api.example.com")
	if err := st.Delete("API_KEY"); err != nil {
		t.Fatal(err)
	}
	if list, _ := st.List(); len(list) != 0 {
		t.Fatalf("after delete: %v", list)
	}
	if err := st.Delete("API_KEY"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("delete again: %v", err)
	}
	if _, err := st.Update("API_KEY", nil, nil); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("update unknown: %v", err)
	}
}

// TestSecretStoreResolveUnknown: Resolve of names the store does not
// hold fails with sandbox.ErrNotFound naming each of them.
func TestSecretStoreResolveUnknown(t *testing.T) {
	st, _ := newSecretStore(t)
	createSecret(t, st, "API_KEY", "api.example.com")
	_, err := st.Resolve(map[string]string{"A": "API_KEY", "B": "MISSING_ONE", "C": "MISSING_TWO"})
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), `"MISSING_ONE"`) || !strings.Contains(err.Error(), `"MISSING_TWO"`) {
		t.Fatalf("resolve unknown: %v", err)
	}
}

// TestSecretStoreRefusesLinkedFile: a store file replaced by a symbolic
// link is refused, not followed.
func TestSecretStoreRefusesLinkedFile(t *testing.T) {
	st, dir := newSecretStore(t)
	createSecret(t, st, "API_KEY", "api.example.com")
	file := filepath.Join(dir, "secrets", "store.json")
	elsewhere := filepath.Join(t.TempDir(), "other.json")
	if err := os.Rename(file, elsewhere); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, file); err != nil {
		t.Fatal(err)
	}
	if list, err := st.List(); err == nil {
		t.Fatalf("a linked store was read: %v", list)
	}
}
