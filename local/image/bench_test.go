//go:build linux

package image

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// benchImage is an image of 4 layers of 64 files of 128 KiB each (32 MiB
// in all), of random text-like bytes that gzip only about 1.3:1.
func benchImage(b *testing.B) v1.Image {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n{}();=+-*/<>"
	var layers []v1.Layer
	for l := range 4 {
		var es []tarEntry
		es = append(es, dirE(fmt.Sprintf("l%d/", l), 0o755))
		for f := range 64 {
			body := make([]byte, 128<<10)
			for i := range body {
				body[i] = alphabet[rng.IntN(len(alphabet))]
			}
			es = append(es, fileE(fmt.Sprintf("l%d/f%d", l, f), string(body), 0o644, 0, 0))
		}
		layers = append(layers, layerOf(b, layerTar(b, es...)))
	}
	return imageOf(b, "", v1.Config{}, layers...)
}

// BenchmarkPull compares a pull into the store (fetch, verify, gunzip,
// unpack to disk) with io.Copy of the same blobs to io.Discard from the
// same loopback registry, and with io.Copy through gunzip (the least a
// pull must do). All report MB/s of compressed blobs.
//
//	go test -run '^$' -bench BenchmarkPull -benchtime 10x ./local/image/
func BenchmarkPull(b *testing.B) {
	requireRoot(b)
	r := newRegistry(b, "", "", nil)
	img := benchImage(b)
	ref := r.push(b, "bench/img:1", img)
	layers, err := img.Layers()
	if err != nil {
		b.Fatal(err)
	}
	var blobBytes, tarBytes int64
	for _, l := range layers {
		n, _ := l.Size()
		blobBytes += n
		rc, _ := l.Uncompressed()
		m, _ := io.Copy(io.Discard, rc)
		rc.Close()
		tarBytes += m
	}
	b.Logf("%d layers, %d MiB of blobs, %d MiB of tar", len(layers), blobBytes>>20, tarBytes>>20)

	// copyBlobs reads every blob from the registry into io.Discard, through
	// gunzip when unzip is set.
	copyBlobs := func(b *testing.B, unzip bool) {
		b.SetBytes(blobBytes)
		for b.Loop() {
			for _, l := range layers {
				d, _ := l.Digest()
				dr, err := name.NewDigest(r.host+"/bench/img@"+d.String(), name.Insecure)
				if err != nil {
					b.Fatal(err)
				}
				rl, err := remote.Layer(dr)
				if err != nil {
					b.Fatal(err)
				}
				rc, err := rl.Compressed()
				if err != nil {
					b.Fatal(err)
				}
				var src io.Reader = rc
				closeDec := func() {}
				if unzip {
					if src, closeDec, err = decompress(bufio.NewReader(rc)); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := io.Copy(io.Discard, src); err != nil {
					b.Fatal(err)
				}
				closeDec()
				rc.Close()
			}
		}
	}
	b.Run("io.Copy", func(b *testing.B) { copyBlobs(b, false) })
	b.Run("io.Copy+gunzip", func(b *testing.B) { copyBlobs(b, true) })
	b.Run("pull+unpack", func(b *testing.B) {
		b.SetBytes(blobBytes)
		dir := b.TempDir()
		i := 0
		for b.Loop() {
			b.StopTimer()
			s, err := Open(filepath.Join(dir, fmt.Sprint(i)))
			if err != nil {
				b.Fatal(err)
			}
			i++
			b.StartTimer()
			if _, err := s.Pull(context.Background(), ref, r.opts()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.RemoveAll(s.Dir()); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}
