package mongosim

import "go.mongodb.org/mongo-driver/v2/bson"

func init() {
	registerCommand(kindWrite, cmdSearchIndex, "createSearchIndexes", "updateSearchIndex", "dropSearchIndex")
}

// codeSearchNotEnabled is what a MongoDB server without Atlas Search (a community or enterprise
// mongod not connected to mongot) answers to the search-index commands and stages.
const codeSearchNotEnabled = 31082

func errSearchNotEnabled() *cmdError {
	return errorf(codeSearchNotEnabled, "Using Atlas Search Database Commands and the $listSearchIndexes aggregation stage requires additional configuration. Please connect to Atlas or an AtlasCLI local deployment to enable. For more information on how to connect, see https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs")
}

// searchStages are the aggregation stages served by Atlas Search.
var searchStages = map[string]bool{"$search": true, "$searchMeta": true, "$vectorSearch": true, "$listSearchIndexes": true}

// cmdSearchIndex answers createSearchIndexes, updateSearchIndex and dropSearchIndex as a server
// without Atlas Search does: SearchNotEnabled (31082), after the usual namespace check.
func cmdSearchIndex(_ *Server, c *command) (bson.D, error) {
	if _, err := collectionArg(c); err != nil {
		return nil, err
	}
	return nil, errSearchNotEnabled()
}
