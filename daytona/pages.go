package daytona

import "iter"

// cursorPages iterates over the items of a cursor-paginated list, page
// after page: fetch returns the page at cursor ("" for the first) and the
// next page's cursor, nil or "" on the last. It stops at the first error,
// which it yields.
func cursorPages[T any](fetch func(cursor string) ([]T, *string, error)) iter.Seq2[*T, error] {
	return func(yield func(*T, error) bool) {
		cursor := ""
		for {
			items, next, err := fetch(cursor)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range items {
				if !yield(&items[i], nil) {
					return
				}
			}
			if next == nil || *next == "" || len(items) == 0 {
				return
			}
			cursor = *next
		}
	}
}
