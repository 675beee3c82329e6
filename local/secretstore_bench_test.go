package local_test

import (
	"fmt"
	"testing"

	"github.com/agentbox-dev/agentbox/local"
	"github.com/agentbox-dev/agentbox/sandbox"
)

// filledStore returns a store holding 20 secrets of 40 bytes.
func filledStore(b *testing.B) *local.SecretStore {
	b.Helper()
	st, err := local.OpenSecretStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		if _, err := st.Create(sandbox.Secret{Name: fmt.Sprintf("KEY_%d", i), Value: storeValue + storeValue[:16], Hosts: []string{"x.example.com"}}, ""); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkSecretStoreList is the baseline of Resolve: reading the store
// file and decoding its records, no value opened.
func BenchmarkSecretStoreList(b *testing.B) {
	st := filledStore(b)
	for b.Loop() {
		if _, err := st.List(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSecretStoreResolve reads the store and opens 3 of its 20
// values: what exec --secret costs on the local engine before the
// sandbox is made.
func BenchmarkSecretStoreResolve(b *testing.B) {
	st := filledStore(b)
	refs := map[string]string{"A": "KEY_0", "B": "KEY_7", "C": "KEY_19"}
	for b.Loop() {
		if _, err := st.Resolve(refs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSecretStoreCreateDelete adds a secret to a store of 20 and
// removes it: twice a lock, a read and an atomic write of the file.
func BenchmarkSecretStoreCreateDelete(b *testing.B) {
	st := filledStore(b)
	for b.Loop() {
		if _, err := st.Create(sandbox.Secret{Name: "NEW", Value: storeValue, Hosts: []string{"x.example.com"}}, ""); err != nil {
			b.Fatal(err)
		}
		if err := st.Delete("NEW"); err != nil {
			b.Fatal(err)
		}
	}
}
