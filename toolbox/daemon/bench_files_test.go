package daemon

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFileAPI measures the file API's cost (download, upload of a
// small and a large file; find over a tree of 2000 files), to compare
// the path resolver's cost with a server that resolves path strings: run
// it on both with -bench FileAPI and compare the ratios.
func BenchmarkFileAPI(b *testing.B) {
	e := newEnv(b, false)
	for _, size := range []int{4 << 10, 8 << 20} {
		data := bytes.Repeat([]byte("0123456789abcde\n"), size/16)
		name := fmt.Sprintf("f%d", size)
		if err := os.WriteFile(filepath.Join(e.work, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("download-%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if resp, body := e.do("GET", "/files/download?path="+name, nil); resp.StatusCode != 200 || len(body) != size {
					b.Fatalf("download: %d, %d bytes", resp.StatusCode, len(body))
				}
			}
		})
		b.Run(fmt.Sprintf("upload-%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if resp, body := e.do("POST", "/files/upload-v2?path="+url.QueryEscape("up/"+name), data); resp.StatusCode != 200 {
					b.Fatalf("upload: %d %s", resp.StatusCode, body)
				}
			}
		})
	}
	tree := filepath.Join(e.work, "tree")
	for i := range 2000 {
		d := filepath.Join(tree, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("e%d", i/10%10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.txt", i)), []byte("some line\nthe needle is here\nlast\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("find-2000-files", func(b *testing.B) {
		for b.Loop() {
			if resp, body := e.do("GET", "/files/find?pattern=needle&path=tree", nil); resp.StatusCode != 200 || bytes.Count(body, []byte("needle")) != 2000 {
				b.Fatalf("find: %d, %d matches", resp.StatusCode, bytes.Count(body, []byte("needle")))
			}
		}
	})
}
