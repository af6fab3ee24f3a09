# Two service accounts: one that Pub/Sub signs push tokens as (the service admits only it), and
# the one the pods run as through Workload Identity.

resource "google_service_account" "push" {
  account_id   = "${var.name}-push"
  display_name = "Pub/Sub push identity of ${var.name}"
  depends_on   = [google_project_service.apis]
}

resource "google_service_account_iam_member" "push_token_creator" {
  service_account_id = google_service_account.push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent
}

resource "google_service_account" "workload" {
  account_id   = var.name
  display_name = "Pods of ${var.name} (Workload Identity)"
  depends_on   = [google_project_service.apis]
}

resource "google_service_account_iam_member" "workload_identity" {
  service_account_id = google_service_account.workload.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.project_id}.svc.id.goog[${var.k8s_namespace}/${var.k8s_service_account}]"
}

# File processing reads the uploaded objects.
resource "google_storage_bucket_iam_member" "workload_reader" {
  bucket = local.bucket
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.workload.email}"
}

# A sweep or a file import that cannot finish within its budget publishes continuations
# (consumer/pipeline/continuation.py, consumer/storage/continued.py).
resource "google_pubsub_topic_iam_member" "workload_continuations_publisher" {
  topic  = google_pubsub_topic.events["continuations"].id
  role   = "roles/pubsub.publisher"
  member = "serviceAccount:${google_service_account.workload.email}"
}

# Every enqueue that commits publishes a wake-up (consumer/jobs/wake.py), and the import of a file
# or a message on the jobs topic enqueues.
resource "google_pubsub_topic_iam_member" "workload_wakeups_publisher" {
  topic  = google_pubsub_topic.events["wakeups"].id
  role   = "roles/pubsub.publisher"
  member = "serviceAccount:${google_service_account.workload.email}"
}

# Spans exported to Cloud Trace (CONSUMER_TRACES_EXPORTER=gcp, docs/observability.md).
resource "google_project_iam_member" "workload_trace_agent" {
  count   = var.cloud_trace ? 1 : 0
  project = var.project_id
  role    = "roles/cloudtrace.agent"
  member  = "serviceAccount:${google_service_account.workload.email}"
}
