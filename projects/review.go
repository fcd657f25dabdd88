package projects

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/osaurus/osaurus-sandbox/agents"
	"github.com/osaurus/osaurus-sandbox/internal/atomicfile"
)

// A review is the set of changes the user was shown: per path its kind,
// type, mode, size and SHA-256. Changes records one in the host's data
// folder (beside the baselines, where no agent reaches) under an id made
// from its content; Apply writes exactly what a review holds and refuses
// whatever differs from it.
type Review struct {
	ID        string        `json:"id"`
	Agent     string        `json:"agent"` // the agent's id
	Project   string        `json:"project"`
	CreatedAt time.Time     `json:"createdAt"`
	Entries   []ReviewEntry `json:"entries"`
}

// ReviewEntry is one change as reviewed.
type ReviewEntry struct {
	Path     string      `json:"path"`
	Kind     string      `json:"kind"`
	Type     string      `json:"type"`
	Mode     fs.FileMode `json:"mode"`
	Size     int64       `json:"size"`
	Hash     string      `json:"hash,omitempty"`
	Refused  string      `json:"refused,omitempty"`
	HostExec string      `json:"hostExec,omitempty"`
	Large    bool        `json:"large,omitempty"`
}

// keepReviews is how many reviews of one view are kept.
const keepReviews = 32

func (v Views) reviewDir(a agents.Agent, name string) string {
	return filepath.Join(v.Paths.ProjectBaselines(), a.ID, "reviews", name)
}

// validReviewID: a review id is 32 lowercase hex digits.
func validReviewID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// saveReview records cs as a review and returns its id.
func (v Views) saveReview(a agents.Agent, cs *ChangeSet) (string, error) {
	r := Review{Agent: a.ID, Project: cs.Project, Entries: []ReviewEntry{}}
	for _, c := range cs.Changes {
		r.Entries = append(r.Entries, ReviewEntry{Path: c.Path, Kind: c.Kind, Type: c.Type, Mode: c.Mode, Size: c.Size,
			Hash: c.Hash, Refused: c.Refused, HostExec: c.HostExec, Large: c.Large})
	}
	body, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(body)
	r.ID = hex.EncodeToString(sum[:16])
	r.CreatedAt = time.Now().UTC()
	dir := v.reviewDir(a, cs.Project)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, r.ID+".json"), b, 0o600); err != nil {
		return "", err
	}
	v.pruneReviews(dir)
	return r.ID, nil
}

// pruneReviews keeps the newest keepReviews reviews of a view.
func (v Views) pruneReviews(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) <= keepReviews {
		return
	}
	type old struct {
		name string
		at   time.Time
	}
	var all []old
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			all = append(all, old{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(all, func(x, y old) int { return y.at.Compare(x.at) })
	for _, o := range all[min(keepReviews, len(all)):] {
		os.Remove(filepath.Join(dir, o.name))
	}
}

// loadReview reads review id of a's view of name.
func (v Views) loadReview(a agents.Agent, name, id string) (*Review, error) {
	notFound := fmt.Errorf("%w: review: %q is not a review of %s's changes to %q; run `osaurus-sandbox changes %s %s` and pass the id it prints",
		ErrInvalid, id, a.Name, name, a.Slug, name)
	if !validReviewID(id) {
		return nil, notFound
	}
	b, err := os.ReadFile(filepath.Join(v.reviewDir(a, name), id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	var r Review
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("review %s: %w", id, err)
	}
	if r.ID != id || r.Agent != a.ID || r.Project != name {
		return nil, notFound
	}
	return &r, nil
}
