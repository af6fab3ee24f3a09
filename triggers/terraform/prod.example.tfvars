# The prod environment; the same values as k8s/overlays/prod (checked by tests/deploy_artifacts).
# cp prod.example.tfvars prod.tfvars, replace the example values, then
# terraform apply -var-file=prod.tfvars
project_id    = "acme-consumer-prod"
region        = "europe-west1"
push_endpoint = "https://consumer.acme.example/push"
bucket_name   = "acme-consumer-prod-uploads"
k8s_namespace = "consumer"
