package mongosim

import (
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func getParameter(t *testing.T, cl *mongo.Client, cmd bson.D) (bson.Raw, error) {
	t.Helper()
	return cl.Database("admin").RunCommand(testCtx(t), cmd).Raw()
}

func TestGetParameterAnswersEachNamedParameter(t *testing.T) {
	_, cl := startServer(t, Options{WireVersion: 21, CursorTimeout: 90 * time.Second})
	raw, err := getParameter(t, cl, bson.D{{Key: "getParameter", Value: 1},
		{Key: "enableTestCommands", Value: 1}, {Key: "requireApiVersion", Value: 1},
		{Key: "featureCompatibilityVersion", Value: 1}, {Key: "cursorTimeoutMillis", Value: 1},
		{Key: "noSuchParameter", Value: 1}, {Key: "comment", Value: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := raw.Lookup("enableTestCommands").BooleanOK(); !ok || !v {
		t.Errorf("enableTestCommands = %s", raw.Lookup("enableTestCommands"))
	}
	if v, ok := raw.Lookup("requireApiVersion").BooleanOK(); !ok || v {
		t.Errorf("requireApiVersion = %s", raw.Lookup("requireApiVersion"))
	}
	if v := raw.Lookup("featureCompatibilityVersion", "version").StringValue(); v != "7.0" {
		t.Errorf("featureCompatibilityVersion = %s", v)
	}
	if v := raw.Lookup("cursorTimeoutMillis").Int64(); v != 90_000 {
		t.Errorf("cursorTimeoutMillis = %d", v)
	}
	for _, absent := range []string{"noSuchParameter", "comment", "transactionLifetimeLimitSeconds"} {
		if _, err := raw.LookupErr(absent); err == nil {
			t.Errorf("reply carries %s, which was not asked for as a parameter: %s", absent, raw)
		}
	}
}

func TestGetParameterStarAndShowDetails(t *testing.T) {
	_, cl := startServer(t, Options{})
	raw, err := getParameter(t, cl, bson.D{{Key: "getParameter", Value: "*"}})
	if err != nil {
		t.Fatal(err)
	}
	for name := range serverParameters {
		if _, err := raw.LookupErr(name); err != nil {
			t.Errorf("getParameter '*' lacks %s", name)
		}
	}
	if v := raw.Lookup("transactionLifetimeLimitSeconds").Int32(); v != 60 {
		t.Errorf("transactionLifetimeLimitSeconds = %d", v)
	}
	raw, err = getParameter(t, cl, bson.D{{Key: "getParameter", Value: bson.D{{Key: "showDetails", Value: true}}},
		{Key: "requireApiVersion", Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	d := raw.Lookup("requireApiVersion").Document()
	if d.Lookup("value").Boolean() || !d.Lookup("settableAtRuntime").Boolean() || !d.Lookup("settableAtStartup").Boolean() {
		t.Errorf("showDetails requireApiVersion = %s", d)
	}
}

func TestGetParameterErrors(t *testing.T) {
	_, cl := startServer(t, Options{})
	for _, tc := range []struct {
		name string
		db   string
		cmd  bson.D
		code int32
	}{
		{"only unknown names", "admin", bson.D{{Key: "getParameter", Value: 1}, {Key: "noSuchParameter", Value: 1}}, codeInvalidOptions},
		{"no name", "admin", bson.D{{Key: "getParameter", Value: 1}}, codeInvalidOptions},
		{"not admin", "test", bson.D{{Key: "getParameter", Value: 1}, {Key: "requireApiVersion", Value: 1}}, codeUnauthorized},
		{"unknown option", "admin", bson.D{{Key: "getParameter", Value: bson.D{{Key: "bogus", Value: true}}}}, 40415},
	} {
		err := cl.Database(tc.db).RunCommand(testCtx(t), tc.cmd).Err()
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.code)
		}
		if tc.code == codeInvalidOptions && ce.Message != "no option found to get" {
			t.Errorf("%s: message %q", tc.name, ce.Message)
		}
	}
}
