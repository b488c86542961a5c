package watchtree

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// TestPipelineKeepsID: a stage that removes or changes the event's _id (its resume token) is
// refused at Spawn, naming the stage, instead of crashing the stream on its first event with
// ChangeStreamFatalError 280; stages that keep _id pass.
func TestPipelineKeepsID(t *testing.T) {
	stage := func(op string, v any) bson.D { return bson.D{{Key: op, Value: v}} }
	refused := []struct {
		name  string
		stage bson.D
		says  string
	}{
		{"project excludes _id", stage("$project", bson.D{{Key: "_id", Value: 0}}), `this $project stage excludes _id`},
		{"project _id false", stage("$project", bson.D{{Key: "fullDocument", Value: 1}, {Key: "_id", Value: false}}), `this $project stage excludes _id`},
		{"project rewrites _id", stage("$project", bson.D{{Key: "_id", Value: "$documentKey"}}), `this $project stage projects "_id"`},
		{"project inside _id", stage("$project", bson.D{{Key: "_id._data", Value: 1}}), `this $project stage projects "_id._data"`},
		{"unset _id", stage("$unset", "_id"), `this $unset stage removes "_id"`},
		{"unset list with _id", stage("$unset", bson.A{"ns", "_id"}), `this $unset stage removes "_id"`},
		{"addFields _id", stage("$addFields", bson.D{{Key: "_id", Value: "$documentKey._id"}}), `this $addFields stage sets "_id"`},
		{"set _id literal", stage("$set", bson.D{{Key: "_id", Value: 7}}), `this $set stage sets "_id"`},
		{"set inside _id", stage("$set", bson.D{{Key: "_id.x", Value: 1}}), `this $set stage sets "_id.x"`},
		{"replaceRoot fullDocument", stage("$replaceRoot", bson.D{{Key: "newRoot", Value: "$fullDocument"}}), `this $replaceRoot stage replaces the root`},
		{"replaceWith fullDocument", stage("$replaceWith", "$fullDocument"), `this $replaceWith stage replaces the root`},
		{"replaceWith merge ending in the document", stage("$replaceWith", bson.D{{Key: "$mergeObjects", Value: bson.A{"$$ROOT", "$fullDocument"}}}), `this $replaceWith stage replaces the root`},
		{"replaceWith literal without _id", stage("$replaceWith", bson.D{{Key: "a", Value: "$fullDocument"}}), `this $replaceWith stage replaces the root`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			s := validStream()
			s.Pipeline = mongo.Pipeline{stage("$match", bson.D{}), tc.stage}
			err := s.Validate()
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want a *ConfigError matching ErrInvalidConfig", err)
			}
			if ce.Field != "Pipeline[1]" {
				t.Errorf("field = %q, want Pipeline[1]", ce.Field)
			}
			msg := err.Error()
			for _, want := range []string{"must keep the event's _id unchanged", "resume token", tc.says} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if _, cerr := compileSpec(s); cerr == nil || cerr.Error() != msg {
				t.Errorf("Spawn's compile = %v, want %v", cerr, err)
			}
		})
	}
	kept := []struct {
		name  string
		stage bson.D
	}{
		{"match on _id", stage("$match", bson.D{{Key: "_id", Value: bson.D{{Key: "$exists", Value: true}}}})},
		{"project inclusion", stage("$project", bson.D{{Key: "fullDocument", Value: 1}, {Key: "operationType", Value: 1}})},
		{"project _id 1", stage("$project", bson.D{{Key: "_id", Value: 1}, {Key: "ns", Value: 1}})},
		{"project _id true", stage("$project", bson.D{{Key: "_id", Value: true}})},
		{"project exclusion of others", stage("$project", bson.D{{Key: "updateDescription", Value: 0}})},
		{"unset others", stage("$unset", bson.A{"updateDescription", "_idx"})},
		{"set others", stage("$set", bson.D{{Key: "tenant", Value: "$fullDocument.tenant"}})},
		{"set _id to itself", stage("$set", bson.D{{Key: "_id", Value: "$_id"}})},
		{"replaceWith merge putting _id back", stage("$replaceWith", bson.D{{Key: "$mergeObjects", Value: bson.A{"$fullDocument", bson.D{{Key: "_id", Value: "$_id"}}, bson.D{{Key: "op", Value: "$operationType"}}}}})},
		{"replaceRoot literal with _id", stage("$replaceRoot", bson.D{{Key: "newRoot", Value: bson.D{{Key: "_id", Value: "$_id"}, {Key: "doc", Value: "$fullDocument"}}}})},
		{"replaceWith ROOT", stage("$replaceWith", "$$ROOT")},
	}
	for _, tc := range kept {
		t.Run(tc.name, func(t *testing.T) {
			s := validStream()
			s.Pipeline = mongo.Pipeline{tc.stage}
			if err := s.Validate(); err != nil {
				t.Errorf("Validate = %v, want nil", err)
			}
		})
	}
}
