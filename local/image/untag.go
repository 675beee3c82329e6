package image

import (
	"context"
	"fmt"
	"slices"
)

// Untag removes the name name from the image or snapshot that has it
// (name as given to Pull or Save, in any spelling of the same reference;
// never an id), keeping the image under its other names. An image whose
// last name it is goes as with [Store.Remove]: the error then matches
// ErrInUse when a holder holds it. The error matches ErrNotFound when no
// image has the name.
func (s *Store) Untag(ctx context.Context, name string) error {
	last, err := s.untag(ctx, name)
	if err != nil || !last {
		return err
	}
	return s.Remove(ctx, name)
}

// untag removes name from its image unless it is the image's last name,
// and reports whether it is.
func (s *Store) untag(ctx context.Context, name string) (last bool, err error) {
	l, err := s.lock(ctx)
	if err != nil {
		return false, err
	}
	defer l.unlock()
	rs, err := s.records()
	if err != nil {
		return false, err
	}
	for _, want := range []string{name, canonicalName(name)} {
		for _, r := range rs {
			if !slices.Contains(r.Names, want) {
				continue
			}
			if len(r.Names) == 1 {
				return true, nil
			}
			r.Names = slices.DeleteFunc(r.Names, func(n string) bool { return n == want })
			if err := writeJSON(s.recordPath(r.ID), r); err != nil {
				return false, fmt.Errorf("image store: %w", err)
			}
			return false, nil
		}
	}
	return false, fmt.Errorf("no image is named %q: %w", name, ErrNotFound)
}
