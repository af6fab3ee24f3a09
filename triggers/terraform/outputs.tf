output "consumer_config" {
  description = "The service's settings that must agree with these triggers: put them in the overlay's config.env."
  value = merge({
    CONSUMER_PUSH_AUDIENCE         = local.push_audience
    CONSUMER_PUSH_SERVICE_ACCOUNTS = google_service_account.push.email
    CONSUMER_ACK_DEADLINE_SECONDS  = tostring(var.ack_deadline_seconds)
    CONSUMER_CONTINUATION_TOPIC    = google_pubsub_topic.events["continuations"].id
    CONSUMER_WAKE_TOPIC            = google_pubsub_topic.events["wakeups"].id
    CONSUMER_SOURCES               = local.sources
    }, var.tick_target == "http" ? {
    CONSUMER_TICK_HOOK_AUDIENCE         = local.tick_audience
    CONSUMER_TICK_HOOK_SERVICE_ACCOUNTS = google_service_account.scheduler[0].email
  } : {})
}

output "workload_service_account" {
  description = "Annotate the Kubernetes service account with it (iam.gke.io/gcp-service-account)."
  value       = google_service_account.workload.email
}

output "topics" {
  description = "Topics by kind (ticks, storage, deploys, continuations, jobs, wakeups)."
  value       = { for kind, topic in google_pubsub_topic.events : kind => topic.name }
}

output "push_subscriptions" {
  description = "Push subscriptions by kind."
  value       = { for kind, sub in google_pubsub_subscription.push : kind => sub.name }
}

output "dead_letter_subscription" {
  description = "Pull this subscription to inspect messages Pub/Sub gave up on."
  value       = google_pubsub_subscription.dead_letter.name
}

output "scheduler_jobs" {
  description = "Cloud Scheduler jobs by task (gcloud scheduler jobs run NAME --location REGION)."
  value       = { for task, job in google_cloud_scheduler_job.tick : task => job.name }
}

output "bucket" {
  description = "The bucket whose uploads under notification_prefix are processed."
  value       = local.bucket
}
