package query

import (
	"fmt"
	"math/rand"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// qbRandValue builds a random small BSON value (documents and arrays up to
// depth levels).
func qbRandValue(r *rand.Rand, depth int) any {
	switch n := r.Intn(8); {
	case n == 0 && depth > 0:
		return qbRandDoc(r, depth-1)
	case n == 1 && depth > 0:
		a := bson.A{}
		for i := r.Intn(4); i > 0; i-- {
			a = append(a, qbRandValue(r, depth-1))
		}
		return a
	case n == 2:
		return fmt.Sprintf("s%d", r.Intn(5))
	case n == 3:
		return nil
	case n == 4:
		return float64(r.Intn(4)) / 2
	default:
		return int32(r.Intn(5))
	}
}

func qbRandDoc(r *rand.Rand, depth int) bson.D {
	d := bson.D{}
	for i := r.Intn(4); i > 0; i-- {
		d = withField(d, string(rune('a'+r.Intn(5))), qbRandValue(r, depth))
	}
	return d
}

// qbRandPath picks a path into doc (existing or not, through arrays by index).
func qbRandPath(r *rand.Rand, doc bson.D) string {
	var cur any = doc
	path := ""
	for depth := 0; depth < 3; depth++ {
		var part string
		switch c := cur.(type) {
		case bson.D:
			if len(c) > 0 && r.Intn(3) > 0 {
				e := c[r.Intn(len(c))]
				part, cur = e.Key, e.Value
			} else {
				part, cur = string(rune('a'+r.Intn(5))), nil
			}
		case bson.A:
			i := r.Intn(len(c) + 2)
			part = fmt.Sprint(i)
			if i < len(c) {
				cur = c[i]
			} else {
				cur = nil
			}
		default:
			return path
		}
		if path == "" {
			path = part
		} else {
			path += "." + part
		}
		if r.Intn(3) == 0 {
			break
		}
	}
	return path
}

// TestQueryUpdateDescriptionReplayRandom applies random modifier and
// pipeline updates to random documents and checks that replaying each
// description on the old document gives the new one.
func TestQueryUpdateDescriptionReplayRandom(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	ops := []string{"$set", "$unset", "$inc", "$push", "$pull", "$pop", "$addToSet", "$rename", "$max", "$mul"}
	applied, replaced := 0, 0
	for iter := 0; iter < 10000; iter++ {
		doc := append(bson.D{{Key: "_id", Value: int32(iter)}}, qbRandDoc(r, 3)...)
		var u any
		if r.Intn(3) == 0 {
			set := bson.D{}
			for i := r.Intn(3) + 1; i > 0; i-- {
				set = withField(set, qbRandPath(r, doc), bson.D{{Key: "$literal", Value: qbRandValue(r, 2)}})
			}
			stages := bson.A{bson.D{{Key: "$set", Value: set}}}
			if r.Intn(2) == 0 {
				stages = append(stages, bson.D{{Key: "$unset", Value: string(rune('a' + r.Intn(5)))}})
			}
			u = stages
		} else {
			mods := bson.D{}
			for i := r.Intn(3) + 1; i > 0; i-- {
				op := ops[r.Intn(len(ops))]
				var arg any
				switch op {
				case "$inc", "$mul":
					arg = int32(r.Intn(3))
				case "$pop":
					arg = int32(1 - 2*r.Intn(2))
				case "$rename":
					arg = string(rune('f' + r.Intn(3)))
				default:
					arg = qbRandValue(r, 1)
				}
				fields, _ := docField(mods, op)
				fd, _ := fields.(bson.D)
				mods = withField(mods, op, withField(fd, qbRandPath(r, doc), arg))
			}
			u = mods
		}
		res, err := ApplyUpdate(doc, u, UpdateOptions{Env: qbEnv()})
		if err != nil || !res.Changed {
			continue
		}
		if res.Replacement {
			replaced++
			continue
		}
		applied++
		if got := qbReplay(t, doc, res); !identical(got, res.Doc) {
			t.Fatalf("update %s on %s:\nnew doc %s\nreplay  %s\ndescription %s", qbJSON(u), qbJSON(doc), qbJSON(res.Doc), qbJSON(got), qbJSON(res.DescriptionDoc()))
		}
	}
	t.Logf("%d updates replayed, %d replacements", applied, replaced)
	if applied < 1000 {
		t.Fatalf("only %d updates (and %d replacements) exercised the replay", applied, replaced)
	}
}
