// Package seal encrypts small records at rest (secret values) with a key
// kept in a file of its own, apart from the records: AES-256-GCM, a
// random nonce per record.
//
// A key file holds 32 random bytes, mode 0600; it is made the first time
// it is needed, atomically (a second process racing to make it reads the
// winner's). Whoever reads the records without the key file learns only
// their lengths.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// KeySize is the size of a key, in bytes.
const KeySize = 32

// ErrOpen is matched (errors.Is) when a record does not open: it was
// sealed with another key, or altered.
var ErrOpen = errors.New("seal: the record does not open with this key (another key, or altered)")

// Box seals and opens records with one key. It is safe for concurrent use.
type Box struct{ aead cipher.AEAD }

// New returns a Box over key (KeySize bytes).
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal: a key is %d bytes, not %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// OpenKeyFile returns a Box over the key in the file path, making the
// file (and its directory, mode 0700) with a new random key when there is
// none. A file that is not a key (another size, not a regular file, a
// symbolic link) is an error: it is never overwritten.
func OpenKeyFile(path string) (*Box, error) {
	key, err := readKey(path)
	if errors.Is(err, os.ErrNotExist) {
		key, err = makeKey(path)
	}
	if err != nil {
		return nil, err
	}
	return New(key)
}

func readKey(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() != KeySize {
		return nil, fmt.Errorf("seal: %s is not a key file (%d bytes of %v): move it away, or point at the right file", path, st.Size(), st.Mode().Type())
	}
	key := make([]byte, KeySize)
	if _, err := f.ReadAt(key, 0); err != nil {
		return nil, fmt.Errorf("seal: read %s: %w", path, err)
	}
	return key, nil
}

// makeKey writes a new key to path, unless another process did first
// (then it reads that one).
func makeKey(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	key := make([]byte, KeySize)
	rand.Read(key)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(key)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("seal: write a key to %s: %w", path, err)
	}
	// A hard link fails if path exists: the first writer wins.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return readKey(path)
		}
		return nil, fmt.Errorf("seal: write a key to %s: %w", path, err)
	}
	return key, nil
}

// Seal returns plaintext encrypted, bound to context (additional data
// that must be given again to Open: a record's name, so that a sealed
// value cannot be moved to another record).
func (b *Box) Seal(plaintext, context []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plaintext)+b.aead.Overhead())
	rand.Read(nonce)
	return b.aead.Seal(nonce, nonce, plaintext, context)
}

// Open returns the plaintext of sealed, or an error matching ErrOpen.
func (b *Box) Open(sealed, context []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, ErrOpen
	}
	out, err := b.aead.Open(nil, sealed[:n], sealed[n:], context)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}
