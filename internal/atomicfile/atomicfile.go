// Package atomicfile writes files that readers see whole or not at all:
// the content goes to a temporary file in the same folder, which is then
// renamed over the target.
package atomicfile

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically, mode 0600. A failure leaves
// path as it was and no temporary file behind.
func WriteFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}

// WriteJSON writes v to path atomically as indented JSON with a final
// newline.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(path, append(b, '\n'))
}
