# New objects under the prefix are announced on the storage topic (OBJECT_FINALIZE, with the
# object resource as JSON: the service keys them by bucket/object#generation).

resource "google_storage_bucket" "uploads" {
  count                       = var.create_bucket ? 1 : 0
  name                        = var.bucket_name
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  depends_on                  = [google_project_service.apis]
}

locals {
  bucket = var.create_bucket ? google_storage_bucket.uploads[0].name : var.bucket_name
}

resource "google_pubsub_topic_iam_member" "storage_publisher" {
  topic  = google_pubsub_topic.events["storage"].id
  role   = "roles/pubsub.publisher"
  member = local.storage_service_agent
}

resource "google_storage_notification" "uploads" {
  bucket             = local.bucket
  payload_format     = "JSON_API_V1"
  topic              = google_pubsub_topic.events["storage"].id
  event_types        = ["OBJECT_FINALIZE"]
  object_name_prefix = var.notification_prefix
  depends_on         = [google_pubsub_topic_iam_member.storage_publisher]
}
