package console

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/watchtree/watchtree/messages"
)

// TestFillLeaseReadsALeaseStateByName: a status with a `lease` message (role enum, holder,
// epoch, expires_at), as the leader actor reports it, fills the row's role and lease columns;
// a status without one leaves the mode as the role.
func TestFillLeaseReadsALeaseStateByName(t *testing.T) {
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("leasetest.proto"), Package: proto.String("leasetest"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/timestamp.proto"},
		EnumType: []*descriptorpb.EnumDescriptorProto{{Name: proto.String("LeaseRole"), Value: []*descriptorpb.EnumValueDescriptorProto{
			{Name: proto.String("LEASE_ROLE_UNSPECIFIED"), Number: proto.Int32(0)},
			{Name: proto.String("LEASE_ROLE_STANDBY"), Number: proto.Int32(2)},
			{Name: proto.String("LEASE_ROLE_LEADER"), Number: proto.Int32(3)},
		}}},
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("LeaseState"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("role"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum(), TypeName: proto.String(".leasetest.LeaseRole"), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
				{Name: proto.String("holder"), Number: proto.Int32(3), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
				{Name: proto.String("epoch"), Number: proto.Int32(4), Type: descriptorpb.FieldDescriptorProto_TYPE_INT64.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
				{Name: proto.String("expires_at"), Number: proto.Int32(5), Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".google.protobuf.Timestamp"), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
			}},
			{Name: proto.String("Status"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("lease"), Number: proto.Int32(19), Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".leasetest.LeaseState"), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
			}},
		},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	leaseD, statusD := fd.Messages().ByName("LeaseState"), fd.Messages().ByName("Status")
	lease := dynamicpb.NewMessage(leaseD)
	expires := time.Unix(1_800_000_000, 0).UTC()
	lease.Set(leaseD.Fields().ByName("role"), protoreflect.ValueOfEnum(3))
	lease.Set(leaseD.Fields().ByName("holder"), protoreflect.ValueOfString("node-a"))
	lease.Set(leaseD.Fields().ByName("epoch"), protoreflect.ValueOfInt64(42))
	lease.Set(leaseD.Fields().ByName("expires_at"), protoreflect.ValueOfMessage(timestamppb.New(expires).ProtoReflect()))
	status := dynamicpb.NewMessage(statusD)
	status.Set(statusD.Fields().ByName("lease"), protoreflect.ValueOfMessage(lease))

	row := &messages.StreamRow{Role: "single-leader"}
	fillLease(row, status)
	if row.GetRole() != "leader" || row.GetLeaseOwner() != "node-a" || row.GetLeaseEpoch() != 42 || !row.GetLeaseExpiresAt().AsTime().Equal(expires) {
		t.Errorf("row = %v", row)
	}
	lease.Set(leaseD.Fields().ByName("role"), protoreflect.ValueOfEnum(2))
	fillLease(row, status)
	if row.GetRole() != "standby" {
		t.Errorf("standby role = %q", row.GetRole())
	}
	row = &messages.StreamRow{Role: "all-instances"}
	fillLease(row, dynamicpb.NewMessage(statusD)) // no lease set
	fillLease(row, (&messages.StatusReply{}).ProtoReflect())
	if row.GetRole() != "all-instances" || row.GetLeaseOwner() != "" {
		t.Errorf("no lease: %v", row)
	}
}
