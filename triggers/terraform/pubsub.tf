# Topics for the three triggers and for continuations, a dead-letter topic, and one push
# subscription per topic. A sweep or a file import that stops on its budget with work left
# publishes continuations (CONSUMER_CONTINUATION_TOPIC = the "continuations" topic's id): pushed
# back to the service, so whichever pod receives one carries on within seconds, and the stopped
# delivery is acknowledged instead of nacked toward the dead-letter limit.
# Producers in any language publish jobs on the jobs topic (attribute job_kind, data the JSON
# payload; consumer/jobs/topic.py). A committed enqueue publishes a wake-up on the wakeups topic
# (CONSUMER_WAKE_TOPIC; consumer/jobs/wake.py): its push sweeps the due jobs now, not at the
# next tick.

# Each push subscription may start only the routes it is for (CONSUMER_SOURCES, output in
# consumer_config; docs/sources.md): a publisher on the jobs topic cannot start a tick, a deploy
# or a file import. Continuations and wake-ups must also carry the service's own signature
# (CONSUMER_SIGNING_SECRETS, in the consumer-secrets Secret).

locals {
  topics = {
    ticks         = "${var.name}-ticks"
    storage       = "${var.name}-storage"
    deploys       = "${var.name}-deploys"
    continuations = "${var.name}-continuations"
    jobs          = "${var.name}-jobs"
    wakeups       = "${var.name}-wakeups"
  }
  routes = {
    ticks         = "tick"
    storage       = "storage"
    deploys       = "deploy"
    continuations = "tick+storage"
    jobs          = "job"
    wakeups       = "tick"
  }
  sources = join(",", [for kind, topic in local.topics : "${topic}-push=${local.routes[kind]}"])
}

resource "google_pubsub_topic" "events" {
  for_each   = local.topics
  name       = each.value
  depends_on = [google_project_service.apis]
}

resource "google_pubsub_topic" "dead_letter" {
  name       = "${var.name}-dead-letter"
  depends_on = [google_project_service.apis]
}

# A topic keeps nothing without a subscription: this one holds dead letters for inspection.
resource "google_pubsub_subscription" "dead_letter" {
  name                       = "${var.name}-dead-letter"
  topic                      = google_pubsub_topic.dead_letter.id
  ack_deadline_seconds       = 60
  message_retention_duration = var.message_retention_duration

  expiration_policy {
    ttl = ""
  }
}

# The push request timeout is the ack deadline: it must equal CONSUMER_ACK_DEADLINE_SECONDS
# (gunicorn's timeout), so the service's handler budget ends before Pub/Sub gives up.
resource "google_pubsub_subscription" "push" {
  for_each                   = local.topics
  name                       = "${each.value}-push"
  topic                      = google_pubsub_topic.events[each.key].id
  ack_deadline_seconds       = var.ack_deadline_seconds
  message_retention_duration = var.message_retention_duration

  push_config {
    push_endpoint = var.push_endpoint

    oidc_token {
      service_account_email = google_service_account.push.email
      audience              = local.push_audience
    }
  }

  retry_policy {
    minimum_backoff = var.retry_minimum_backoff
    maximum_backoff = var.retry_maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  expiration_policy {
    ttl = ""
  }

  depends_on = [google_service_account_iam_member.push_token_creator]
}

# Dead-lettering needs the Pub/Sub service agent to publish to the dead-letter topic and to
# acknowledge on the source subscriptions.
resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  topic  = google_pubsub_topic.dead_letter.id
  role   = "roles/pubsub.publisher"
  member = local.pubsub_service_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  for_each     = google_pubsub_subscription.push
  subscription = each.value.id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}

# CI systems announce releases on the deploys topic.
resource "google_pubsub_topic_iam_member" "deploy_publishers" {
  for_each = toset(var.deploy_publishers)
  topic    = google_pubsub_topic.events["deploys"].id
  role     = "roles/pubsub.publisher"
  member   = each.value
}

# Producers of jobs (a service account of each system that enqueues through the jobs topic).
resource "google_pubsub_topic_iam_member" "job_publishers" {
  for_each = toset(var.job_publishers)
  topic    = google_pubsub_topic.events["jobs"].id
  role     = "roles/pubsub.publisher"
  member   = each.value
}
