# APIs and the Google-managed service agents that act on our behalf.

resource "google_project_service" "apis" {
  for_each = toset([
    "iam.googleapis.com",
    "pubsub.googleapis.com",
    "cloudscheduler.googleapis.com",
    "storage.googleapis.com",
    "monitoring.googleapis.com",
    "cloudtrace.googleapis.com",
  ])
  service            = each.value
  disable_on_destroy = false
}

data "google_project" "this" {
  project_id = var.project_id
}

# The storage service agent publishes the bucket's notifications.
data "google_storage_project_service_account" "gcs" {
  project    = var.project_id
  depends_on = [google_project_service.apis]
}

locals {
  # The Pub/Sub service agent signs push tokens and moves messages to the dead-letter topic.
  pubsub_service_agent  = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  storage_service_agent = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
  push_audience         = var.push_audience != "" ? var.push_audience : var.push_endpoint
  # HTTP ticks go to /ticks/TASK on the push host; every job signs for one audience.
  tick_endpoint = "${trimsuffix(var.push_endpoint, "/push")}/ticks"
  tick_audience = local.tick_endpoint
}
