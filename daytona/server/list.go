package server

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// listQuery is what GET /sandbox and GET /sandbox/paginated filter and
// sort by.
type listQuery struct {
	org                  string // the request's organization: only its sandboxes
	idPrefix, namePrefix string // lower case
	labels               map[string]string
	states               []string
	public               *bool
	sort                 string // a SandboxListSortField
	desc                 bool
}

// parseListQuery reads the filters of q.
func parseListQuery(org string, q url.Values) (listQuery, error) {
	lq := listQuery{
		org:        org,
		idPrefix:   strings.ToLower(q.Get("id")),
		namePrefix: strings.ToLower(q.Get("name")),
		sort:       cmp.Or(q.Get("sort"), "createdAt"),
		desc:       true,
	}
	if raw := q.Get("labels"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &lq.labels); err != nil {
			return lq, errorf(http.StatusBadRequest, "labels must be a JSON object of strings, such as {\"team\":\"infra\"}: %v", err)
		}
	}
	for _, st := range q["states"] {
		for _, one := range strings.Split(st, ",") {
			if !slices.Contains(sandboxStates, one) {
				return lq, errorf(http.StatusBadRequest, "each value in states must be one of the following values: %s", strings.Join(sandboxStates, ", "))
			}
			lq.states = append(lq.states, one)
		}
	}
	if raw := q.Get("isPublic"); raw != "" {
		b, err := parseBool("isPublic", raw)
		if err != nil {
			return lq, err
		}
		lq.public = &b
	}
	if _, ok := sortKeys[lq.sort]; !ok {
		return lq, errorf(http.StatusBadRequest, "sort must be one of the following values: %s", strings.Join(slices.Sorted(maps.Keys(sortKeys)), ", "))
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.desc = false
	default:
		return lq, errorf(http.StatusBadRequest, "order must be one of the following values: asc, desc")
	}
	return lq, nil
}

// sortKeys maps each SandboxListSortField to a key of a record that sorts
// as the field does (as strings).
var sortKeys = map[string]func(*record) string{
	"createdAt":      func(rec *record) string { return rec.createdAt.UTC().Format(sortableTime) },
	"lastActivityAt": func(rec *record) string { return rec.lastActivity.UTC().Format(sortableTime) },
	"name":           func(rec *record) string { return strings.ToLower(rec.name) },
	"cpu":            func(rec *record) string { return sortableNumber(rec.sizes.cpu) },
	"memoryGib":      func(rec *record) string { return sortableNumber(rec.sizes.memoryGiB) },
	"diskGib":        func(rec *record) string { return sortableNumber(rec.sizes.diskGiB) },
}

const sortableTime = "2006-01-02T15:04:05.000000000Z"

func sortableNumber(f float64) string { return fmt.Sprintf("%020.6f", f) }

// match reports whether rec passes lq's filters.
func (lq *listQuery) match(rec *record) bool {
	if rec.org != lq.org || !strings.HasPrefix(strings.ToLower(rec.id), lq.idPrefix) || !strings.HasPrefix(strings.ToLower(rec.name), lq.namePrefix) {
		return false
	}
	for k, v := range lq.labels {
		if got, ok := rec.labels[k]; !ok || got != v {
			return false
		}
	}
	if len(lq.states) > 0 && !slices.Contains(lq.states, rec.state) {
		return false
	}
	return lq.public == nil || *lq.public == rec.public
}

// sorted is a record and its sort key.
type sorted struct {
	key string
	rec *record
}

// selectSorted returns the records lq selects, in its order. It takes
// s.mu.
func (s *Server) selectSorted(lq *listQuery) []sorted {
	key := sortKeys[lq.sort]
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sorted
	for _, rec := range s.byID {
		if lq.match(rec) {
			out = append(out, sorted{key(rec), rec})
		}
	}
	slices.SortFunc(out, func(a, b sorted) int {
		c := cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rec.id, b.rec.id))
		if lq.desc {
			return -c
		}
		return c
	})
	return out
}

// listLimit reads a page size: default def, from 1 to max.
func listLimit(raw string, def, max int) (int, error) {
	if raw == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || f != math.Trunc(f) || f < 1 || f > float64(max) {
		return 0, errorf(http.StatusBadRequest, "limit must be a whole number from 1 to %d", max)
	}
	return int(f), nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	lq, err := parseListQuery(orgOf(r), q)
	if err != nil {
		return err
	}
	limit, err := listLimit(q.Get("limit"), 100, 200)
	if err != nil {
		return err
	}
	all := s.selectSorted(&lq)
	start := 0
	if raw := q.Get("cursor"); raw != "" {
		after, err := decodeCursor(raw)
		if err != nil {
			return err
		}
		// The first record past the cursor's position, whether or not
		// the record there still exists.
		start, _ = slices.BinarySearchFunc(all, after, func(e sorted, t sorted) int {
			c := cmp.Or(cmp.Compare(e.key, t.key), cmp.Compare(e.rec.id, t.rec.id))
			if lq.desc {
				c = -c
			}
			if c == 0 {
				return -1 // equal to the cursor: before the page
			}
			return c
		})
	}
	page := all[start:min(start+limit, len(all))]
	out := listSandboxes{Items: make([]sandboxListItem, 0, len(page))}
	proxy := s.toolboxProxyURL(r)
	s.mu.Lock()
	for _, e := range page {
		out.Items = append(out.Items, e.rec.item(proxy))
	}
	s.mu.Unlock()
	if start+limit < len(all) {
		c := encodeCursor(page[len(page)-1])
		out.NextCursor = &c
	}
	writeJSON(w, out)
	return nil
}

// A cursor is the sort key and id of the last record of a page,
// base64url-encoded.
func encodeCursor(e sorted) string {
	return base64.RawURLEncoding.EncodeToString([]byte(e.key + "\x00" + e.rec.id))
}

func decodeCursor(raw string) (sorted, error) {
	b, err := base64.RawURLEncoding.DecodeString(raw)
	key, id, ok := strings.Cut(string(b), "\x00")
	if err != nil || !ok {
		return sorted{}, errorf(http.StatusBadRequest, "cursor %q is not one this server gave", raw)
	}
	return sorted{key: key, rec: &record{id: id}}, nil
}

func (s *Server) listSandboxesPaginated(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	lq := listQuery{org: orgOf(r), sort: "createdAt", desc: true}
	if raw := q.Get("labels"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &lq.labels); err != nil {
			return errorf(http.StatusBadRequest, "labels must be a JSON object of strings: %v", err)
		}
	}
	limit, err := listLimit(q.Get("limit"), 10, 200)
	if err != nil {
		return err
	}
	pageNo := 1
	if raw := q.Get("page"); raw != "" {
		if pageNo, err = strconv.Atoi(raw); err != nil || pageNo < 1 {
			return errorf(http.StatusBadRequest, "page must be a whole number, at least 1")
		}
	}
	all := s.selectSorted(&lq)
	from := min((pageNo-1)*limit, len(all))
	page := all[from:min(from+limit, len(all))]
	out := paginatedSandboxes{Items: make([]sandboxDTO, 0, len(page)), Total: len(all), Page: pageNo,
		TotalPages: (len(all) + limit - 1) / limit}
	proxy := s.toolboxProxyURL(r)
	s.mu.Lock()
	for _, e := range page {
		out.Items = append(out.Items, e.rec.dto(proxy))
	}
	s.mu.Unlock()
	writeJSON(w, out)
	return nil
}
